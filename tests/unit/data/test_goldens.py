"""Golden store: layout, round trip, missing/stale/corrupt, atomic and concurrent writes."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from harness.core.errors import GoldenCorrupt, GoldenMissing, GoldenStale, UserError
from harness.core.locks import LockTimeout, held, lock_for
from harness.data.goldens import Golden, GoldenStore, ensure_golden
from harness.data.models import ModelSpec, resolve_model
from harness.data.recipes import InputRecipe
from tests.helpers.graphs import mlp_model, save

RECIPE = InputRecipe(seed=1, iterations=2)


def _golden(scale: float = 1.0) -> Golden:
    feeds = [{"x": np.full((1, 8), i * scale, np.float32)} for i in range(2)]
    outputs = [{"y": np.full((1, 4), i + 0.5, np.float32), "h": np.arange(3, dtype=np.float32)} for i in range(2)]
    return Golden(feeds=feeds, outputs=outputs, meta={"producer": "ort[CPUExecutionProvider]", "inputs": {"seed": 1}})


@pytest.fixture
def spec(tmp_path: Path) -> ModelSpec:
    return resolve_model(str(save(mlp_model(), tmp_path / "models" / "mlp.onnx")), search_dir=tmp_path)


def test_round_trip_layout_and_sidecar(tmp_path: Path, spec: ModelSpec) -> None:
    store = GoldenStore(tmp_path / "goldens")
    path = store.write(spec, RECIPE, _golden())
    assert path == tmp_path / "goldens" / "mlp" / f"{RECIPE.id}.npz"
    with np.load(path, allow_pickle=False) as data:
        assert sorted(data.files) == ["input/0/x", "input/1/x", "output/0/h", "output/0/y", "output/1/h", "output/1/y"]
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["schema_version"] == 1 and meta["model_sha256"] == spec.sha256
    assert meta["producer"] == "ort[CPUExecutionProvider]" and meta["inputs"]["id"] == RECIPE.id
    assert {"onnx", "onnxruntime", "numpy"} <= set(meta["versions"])
    golden = store.load(spec, RECIPE)
    np.testing.assert_array_equal(golden.feeds[1]["x"], _golden().feeds[1]["x"])
    np.testing.assert_array_equal(golden.outputs[0]["h"], np.arange(3))
    assert not list(path.parent.glob("*.tmp")) and not list(path.parent.glob("*.lock"))


def test_identical_goldens_are_identical_bytes(tmp_path: Path, spec: ModelSpec) -> None:
    a = GoldenStore(tmp_path / "a").write(spec, RECIPE, _golden())
    b = GoldenStore(tmp_path / "b").write(spec, RECIPE, _golden())
    assert a.read_bytes() == b.read_bytes()


def test_bf16_arrays_survive(tmp_path: Path, spec: ModelSpec) -> None:
    golden = _golden()
    golden.outputs[0]["y"] = np.array([1.5, -3.0], ml_dtypes.bfloat16)
    store = GoldenStore(tmp_path)
    store.write(spec, RECIPE, golden)
    back = store.load(spec, RECIPE).outputs[0]["y"]
    assert back.dtype == np.dtype(ml_dtypes.bfloat16) and back.tolist() == [1.5, -3.0]


def test_missing(tmp_path: Path, spec: ModelSpec) -> None:
    with pytest.raises(GoldenMissing) as err:  # the command selects this model and recipe again
        GoldenStore(tmp_path).load(spec, RECIPE)
    assert f"pytest --model {spec.path} --seed 1 --iterations 2" in err.value.fix


def test_stale_golden_names_the_fix(tmp_path: Path, spec: ModelSpec) -> None:
    store = GoldenStore(tmp_path / "g")
    store.write(spec, RECIPE, _golden())
    save(mlp_model(seed=9), spec.path)
    changed = resolve_model(str(spec.path), search_dir=tmp_path)
    with pytest.raises(GoldenStale) as err:
        store.load(changed, RECIPE)
    text = str(err.value)
    assert "never reused" in text and "--update-goldens" in text and spec.sha256[:12] in text


@pytest.mark.parametrize("damage", ["json", "schema", "npz", "mismatch", "extra-key"])
def test_corrupt_goldens_are_errors(tmp_path: Path, spec: ModelSpec, damage: str) -> None:
    store = GoldenStore(tmp_path)
    path = store.write(spec, RECIPE, _golden())
    side = path.with_suffix(".json")
    meta = json.loads(side.read_text())
    if damage == "json":
        side.write_text("{not json")
    elif damage == "schema":
        side.write_text(json.dumps({**meta, "schema_version": 99}))
    elif damage == "npz":
        path.write_bytes(path.read_bytes()[:40])
        side.write_text(json.dumps({**meta, "npz_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}))
    elif damage == "mismatch":
        GoldenStore(tmp_path / "other").write(spec, RECIPE, _golden(scale=2.0)).replace(path)
    else:
        np.savez(path, **{"input/0/x": np.zeros(1), "output/0/y": np.zeros(1), "weird": np.zeros(1)})
        side.write_text(json.dumps({**meta, "npz_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}))
    with pytest.raises(GoldenCorrupt) as err:
        store.load(spec, RECIPE)
    assert "fix:" in str(err.value)


def test_ensure_writes_once_then_loads(tmp_path: Path, spec: ModelSpec) -> None:
    store = GoldenStore(tmp_path)
    calls = []

    def produce() -> Golden:
        calls.append(1)
        return _golden()

    _, written = ensure_golden(store, spec, RECIPE, update=False, produce=produce)
    assert written is not None
    golden, written = ensure_golden(store, spec, RECIPE, update=False, produce=produce)
    assert written is None and len(calls) == 1 and len(golden.feeds) == 2
    path = store.path_for(spec, RECIPE)
    before = path.stat().st_mtime_ns
    _, written = ensure_golden(store, spec, RECIPE, update=True, produce=produce)
    assert written is None and len(calls) == 2  # regenerated, value-identical: left alone, nothing to review
    assert path.stat().st_mtime_ns == before
    _, written = ensure_golden(store, spec, RECIPE, update=True, produce=lambda: _golden(scale=2.0))
    assert written == path  # changed values: rewritten (the caller fails once)


def test_lock_timeout_is_a_clear_error(tmp_path: Path, spec: ModelSpec) -> None:
    """A lock held by a live holder times out with one error naming the lock file; a leftover lock *file* with
    no holder (what a killed run of the old O_EXCL lock left) blocks nothing."""
    store = GoldenStore(tmp_path, lock_timeout_s=0.2)
    lock = lock_for(store.path_for(spec, RECIPE))
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("12345")
    with pytest.raises(GoldenMissing):
        store.load(spec, RECIPE)
    with held(lock):
        with pytest.raises(LockTimeout, match="golden lock still held by another process after 0.2 s") as err:
            store.load(spec, RECIPE)
    assert str(lock) in str(err.value) and "fix: wait for the other castguard run" in str(err.value)
    assert isinstance(err.value, UserError)


def _worker(root: str, model_path: str, queue: multiprocessing.Queue) -> None:
    spec = resolve_model(model_path, search_dir=Path(root))
    _, written = ensure_golden(GoldenStore(Path(root) / "goldens"), spec, RECIPE, update=False, produce=_golden)
    queue.put(written is not None)


def test_concurrent_writers_do_not_race(tmp_path: Path, spec: ModelSpec) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), str(spec.path), queue)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    wrote = sorted(queue.get(timeout=5) for _ in procs)
    assert wrote == [False, False, False, True]
    golden = GoldenStore(tmp_path / "goldens").load(spec, RECIPE)
    assert len(golden.outputs) == 2


def test_the_rerun_command_keeps_the_key_and_the_input_options(tmp_path: Path, spec: ModelSpec) -> None:
    import shlex

    from harness.data.models import ModelSpec as Spec
    from harness.data.rerun import rerun_command

    named = Spec(name="bert", path=spec.path, sha256=spec.sha256)  # --model bert=PATH: rerun by KEY=PATH
    recipe = InputRecipe(seed=2, val_ranges=(("x", 0.0, 2.5), ("", -1.0, 1.0)), input_shapes=(("x", (1, 8)),))
    words = shlex.split(rerun_command(named, recipe, "--update-goldens"))
    assert words == [
        "pytest",
        "--model",
        f"bert={spec.path}",
        "--val-range",
        "x:[0,2.5]",
        "--val-range",
        "[-1,1]",
        "--input-shapes",
        "x:1x8",
        "--seed",
        "2",
        "--update-goldens",
    ]
    assert "'x:[0,2.5]'" in rerun_command(named, recipe)  # quoted: [..] is a shell pattern
    bundled = Spec(name="mnist", path=spec.path, sha256=spec.sha256, rerun="mnist")
    assert rerun_command(bundled, recipe, input_options=False) == "pytest --model mnist --input-shapes x:1x8 --seed 2"


def test_a_golden_over_100_mb_warns_with_its_size_and_a_smaller_command(
    tmp_path: Path, spec: ModelSpec, caplog: pytest.LogCaptureFixture
) -> None:
    from harness.data.rerun import large_golden_warning

    recipe = InputRecipe(input_shapes=(("input_ids", (8, 512)),), iterations=2)
    logits = np.zeros((8, 512, 6200), np.float32)  # 102 MB
    text = large_golden_warning(tmp_path / "g.npz", {"output/0/logits": logits}, spec=spec, recipe=recipe)
    assert text is not None and "102 MB" in text and "output/0/logits 8x512x6200 float32" in text
    assert "--input-shapes input_ids:4x256" in text and "--iterations 1" in text
    assert large_golden_warning(tmp_path / "g.npz", {"y": logits[:1]}, spec=spec, recipe=recipe) is None
    store = GoldenStore(tmp_path / "goldens")
    big = Golden(feeds=[{"x": np.ones((1, 8), np.float32)}], outputs=[{"logits": logits}], meta={"producer": "ort"})
    with caplog.at_level("WARNING", logger="harness.data"):
        store.write(spec, recipe, big)
    assert any("this golden is 102 MB" in r.getMessage() for r in caplog.records)


def test_a_large_member_is_stored_uncompressed_and_reads_back(
    tmp_path: Path, spec: ModelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Members above COMPRESS_MAX_BYTES (large logits) are stored, not deflated (issue 31: deflating 134 MB took 45 s);
    smaller ones stay deflated, and both read back exactly."""
    import zipfile

    monkeypatch.setattr("harness.core.npzfile.COMPRESS_MAX_BYTES", 40)  # x (32 bytes), h (12): small
    golden = _golden()
    golden.outputs[0]["y"] = np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16)  # 256 bytes: large
    path = GoldenStore(tmp_path / "goldens").write(spec, RECIPE, golden)
    with zipfile.ZipFile(path) as archive:
        kinds = {info.filename: info.compress_type for info in archive.infolist()}
    assert kinds["output/0/y.npy"] == zipfile.ZIP_STORED
    assert kinds["output/0/h.npy"] == kinds["input/0/x.npy"] == zipfile.ZIP_DEFLATED
    back = GoldenStore(tmp_path / "goldens").load(spec, RECIPE)
    np.testing.assert_array_equal(back.outputs[0]["y"], golden.outputs[0]["y"])
    np.testing.assert_array_equal(back.outputs[1]["y"], golden.outputs[1]["y"])


def test_degenerate_reads_each_iteration_in_its_own_type() -> None:
    """degenerate() (no float64 copy of the outputs, issue 31): constant over fp16 and bf16 iterations, all non-finite,
    and not constant when one value of a later iteration differs."""
    from harness.data.degenerate import degenerate

    bf16 = np.dtype(ml_dtypes.bfloat16)
    constant = [{"y": np.full(3, 2.5, np.float16)}, {"y": np.full(2, 2.5, bf16)}]
    assert [(d.kind, d.values, d.value) for d in degenerate(constant)] == [("constant", 5, 2.5)]
    nans = [{"y": np.array([np.nan, np.inf], np.float32)}, {"y": np.array([-np.inf], np.float32)}]
    assert [(d.kind, d.values) for d in degenerate(nans)] == [("not_finite", 3)]
    varied = [{"y": np.full(3, 2.5, np.float32)}, {"y": np.array([2.5, 2.5000002], np.float32)}]
    assert degenerate(varied) == ()
