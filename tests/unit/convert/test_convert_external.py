"""Models with external data, end to end at CI size (a few MB): lazy conversion, streamed output, bad input.

The big-model figures (2.5 GB) come from benchmarks/bench_big.py; these tests exercise the same code paths
with every tensor above 1 KiB on disk.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from harness.convert import ConvertOptions, collect_magnitudes, convert, convert_to_mixed_precision
from harness.convert.outputs import output_groups
from harness.core.errors import ModelError
from harness.data.onnxfile import external_tensors, load_model, model_sha256
from harness.data.onnxsave import ALIGN, save_model
from tests.helpers.convert_builders import F32, init, model, node, vi

REPO = Path(__file__).resolve().parents[3]
K = 384
LAYERS = 4


def big_mlp() -> onnx.ModelProto:
    """x[2,K] -> 4 x (MatMul W_i -> Add B_i -> Relu) -> y: 4 x 576 KiB of weights; W0 holds values beyond fp16."""
    rng = np.random.default_rng(7)
    nodes, inits, prev = [], [], "x"
    for i in range(LAYERS):
        w = (rng.standard_normal((K, K)) / np.sqrt(K)).astype(np.float32)
        if i == 0:
            w[0, :3] = [1e5, -7e4, 7e4]  # clamped when stored in fp16 (init_max=inf lets them convert)
        inits += [init(f"W{i}", w), init(f"B{i}", rng.standard_normal(K).astype(np.float32) * 0.1)]
        nodes += [
            node("MatMul", [prev, f"W{i}"], [f"mm{i}"], f"matmul{i}"),
            node("Add", [f"mm{i}", f"B{i}"], [f"add{i}"], f"add{i}"),
            node("Relu", [f"add{i}"], [f"h{i}"], f"relu{i}"),
        ]
        prev = f"h{i}"
    nodes.append(node("Identity", [prev], ["y"], "out"))
    return model(nodes, [vi("x", F32, [2, K])], [vi("y", F32, [2, K])], inits)


@pytest.fixture
def ext_path(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    onnx.save_model(
        big_mlp(), str(folder / "big.onnx"), save_as_external_data=True, location="weights.bin", size_threshold=1024
    )
    return folder / "big.onnx"


def cli(*args: str, cwd: Path, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the quota fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "harness.convert", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=limit if fsize is not None else None,
    )


def test_cli_streams_an_external_data_model_into_one_aligned_data_file(ext_path: Path, tmp_path: Path) -> None:
    work = tmp_path / "empty"
    work.mkdir()
    proc = cli(
        f"--onnx_path={ext_path}", "--output_path", "out/big.fp16.onnx", "--init_max=inf", "--data_max", "inf", cwd=work
    )
    assert proc.returncode == 0, proc.stderr
    out = work / "out" / "big.fp16.onnx"
    assert sorted(p.name for p in out.parent.iterdir()) == ["big.fp16.onnx", "big.fp16.onnx.data"]
    onnx.checker.check_model(str(out), full_check=True)
    lazy = onnx.load(str(out), load_external_data=False)
    tensors = external_tensors(lazy)
    assert [t.name for t in tensors] == [f"W{i}" for i in range(LAYERS)]  # fp16 biases (768 B) stay inline
    for tensor in tensors:
        entries = {e.key: e.value for e in tensor.external_data}
        assert entries["location"] == "big.fp16.onnx.data" and int(entries["offset"]) % ALIGN == 0
        assert not tensor.metadata_props
    # bit-identical to the in-memory conversion (AutoCast's function) of the same file
    expected = convert_to_mixed_precision(ext_path, init_max=float("inf"), data_max=float("inf"))
    got = onnx.load(str(out))
    for want, have in zip(expected.graph.initializer, got.graph.initializer):
        assert (want.name, want.data_type) == (have.name, have.data_type)
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(have), onnx.numpy_helper.to_array(want))
    assert "W0: 3 value(s) clamped to +-65504" in proc.stderr
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((2, K)).astype(np.float16)
    assert np.isfinite(session.run(None, {"x": x})[0]).all()


def test_lazy_conversion_keeps_weights_on_disk(ext_path: Path) -> None:
    lazy = load_model(ext_path, weights="lazy")
    assert [t.name for t in external_tensors(lazy)] == [f"W{i}" for i in range(LAYERS)]  # biases: 1.5 KB, loaded
    assert all(not t.raw_data for t in external_tensors(lazy))
    magnitudes = collect_magnitudes(ext_path)
    options = ConvertOptions(init_max=float("inf"), data_max=float("inf"))
    result = convert(lazy, options=options, magnitudes=magnitudes, base_dir=ext_path.parent)
    assert result.base_dir == ext_path.parent
    assert all(not t.raw_data for t in external_tensors(result.model))  # converted when saved, not before
    assert [t.data_type for t in external_tensors(result.model)] == [onnx.TensorProto.FLOAT16] * LAYERS
    eager = convert(load_model(ext_path), options=options, magnitudes=magnitudes)
    assert (result.low_nodes, result.high_nodes, result.clamped) == (eager.low_nodes, eager.high_nodes, eager.clamped)
    assert load_model(ext_path).graph.initializer[0].data_type == F32  # the source is untouched


def test_init_max_reads_lazy_weights(ext_path: Path) -> None:
    result = convert(
        load_model(ext_path, weights="lazy"), options=ConvertOptions(), magnitudes=None, base_dir=ext_path.parent
    )
    assert dict(result.high_nodes)["matmul0"].startswith("init_max: initializer 'W0' absmax 100000")


def test_grouped_reference_runs_give_the_same_magnitudes(ext_path: Path) -> None:
    one = collect_magnitudes(ext_path)
    many = collect_magnitudes(ext_path, max_output_bytes=1)
    assert one.absmax == many.absmax and one.absmin == many.absmin and one.shapes == many.shapes
    lazy = load_model(ext_path, weights="lazy")
    feed = {"x": np.zeros((2, K), np.float32)}
    assert len(output_groups(lazy, max_output_bytes=2 * K * 4, feed=feed)) == 1
    marked = onnx.ModelProto()
    marked.CopyFrom(lazy)
    marked.graph.output.extend(onnx.ValueInfoProto(name=n.output[0]) for n in lazy.graph.node[:3])
    assert [len(g) for g in output_groups(marked, max_output_bytes=2 * K * 4, feed=feed)] == [1, 1, 1, 1]


def test_sha256_covers_the_external_data(ext_path: Path) -> None:
    before = model_sha256(ext_path)
    data = ext_path.with_name("weights.bin")
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 1
    data.write_bytes(bytes(raw))
    assert model_sha256(ext_path) != before


def _edit_location(path: Path, location: str) -> None:
    proto = onnx.load(str(path), load_external_data=False)
    for tensor in external_tensors(proto):
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(proto, str(path))


@pytest.mark.parametrize(
    "damage, message",
    [
        ("missing", "external data file 'weights.bin' of tensor 'W0' is missing"),
        ("truncated", "external data file 'weights.bin' is truncated"),
        ("escaping", "points to external data '../weights.bin', outside the model's folder"),
    ],
)
def test_bad_external_data_is_one_message_and_nothing_written(
    ext_path: Path, tmp_path: Path, damage: str, message: str
) -> None:
    data = ext_path.with_name("weights.bin")
    if damage == "missing":
        data.unlink()
    elif damage == "truncated":
        data.write_bytes(data.read_bytes()[:-100])
    else:
        data.rename(tmp_path / "weights.bin")
        _edit_location(ext_path, "../weights.bin")
    before = sorted(p.name for p in ext_path.parent.iterdir())
    proc = cli("--onnx_path", str(ext_path), "--data_max=inf", cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and str(ext_path) in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in ext_path.parent.iterdir()) == before
    with pytest.raises(ModelError, match=message.split("'")[0]):
        load_model(ext_path, weights="lazy")


def test_disk_full_during_the_write_leaves_nothing_behind(ext_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    proc = cli(
        "--onnx_path",
        str(ext_path),
        "--output_path",
        str(out / "big.fp16.onnx"),
        "--data_max",
        "inf",
        cwd=tmp_path,
        fsize=600_000,
    )  # the fp16 weights need ~1.2 MB
    assert proc.returncode == 2, proc.stderr
    assert "cannot write the model (File too large); nothing was written" in proc.stderr
    assert str(out / "big.fp16.onnx") in proc.stderr and "fix: free disk space" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(out.iterdir()) == []


def test_save_model_rejects_a_lazy_model_without_its_folder(ext_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pass base_dir"):
        save_model(load_model(ext_path, weights="lazy"), tmp_path / "copy.onnx")
    assert not (tmp_path / "copy.onnx").exists()


def rules_model() -> onnx.ModelProto:
    """Every rule that reads weight values, with each weight big enough to be external: a weight shared by an
    fp16 and an fp32 consumer (exact in fp16: stored once, in fp16), a Div denominator with a value below fp16's
    smallest normal (rule 7 keeps it fp32), a Pow with a non-negative exponent."""
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((K, K)) / np.sqrt(K)).astype(np.float16).astype(np.float32)
    d = rng.uniform(0.5, 2.0, (1, K)).astype(np.float32)
    d[0, 5] = 1e-6
    e = rng.uniform(1.0, 2.0, (1, K)).astype(np.float32)
    nodes = [
        node("MatMul", ["x", "W"], ["a"], "mm_low"),
        node("MatMul", ["x", "W"], ["b"], "mm_keep"),
        node("Add", ["a", "b"], ["s"], "add"),
        node("Div", ["s", "D"], ["q"], "div"),
        node("Abs", ["q"], ["m"], "abs"),
        node("Pow", ["m", "E"], ["y"], "pow"),
    ]
    return model(nodes, [vi("x", F32, [2, K])], [vi("y", F32, [2, K])], [init("W", w), init("D", d), init("E", e)])


def test_every_weight_rule_decides_the_same_on_disk_as_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "rules" / "r.onnx"
    path.parent.mkdir()
    onnx.save_model(rules_model(), str(path), save_as_external_data=True, location="r.bin", size_threshold=1024)
    lazy = load_model(path, weights="lazy", lazy_above=0)  # the test setting: every external tensor lazy
    assert [t.name for t in external_tensors(lazy)] == ["W", "D", "E"]
    feeds = [{"x": np.random.default_rng(2).standard_normal((2, K)).astype(np.float32)}]
    magnitudes = collect_magnitudes(lazy, feeds=feeds, base_dir=path.parent)
    options = ConvertOptions(nodes_to_exclude=("mm_keep",), data_max=float("inf"), keep_io_types=True)
    on_disk = convert(lazy, options=options, magnitudes=magnitudes, base_dir=path.parent)
    in_memory = convert(load_model(path), options=options, magnitudes=magnitudes)
    assert (on_disk.low_nodes, on_disk.high_nodes, on_disk.cast_count) == (
        in_memory.low_nodes,
        in_memory.high_nodes,
        in_memory.cast_count,
    )
    assert "div" in dict(on_disk.high_nodes) and "pow" in on_disk.low_nodes and "mm_low" in on_disk.low_nodes
    save_model(on_disk.model, tmp_path / "out" / "r.onnx", base_dir=on_disk.base_dir)
    saved = {t.name: t for t in onnx.load(str(tmp_path / "out" / "r.onnx")).graph.initializer}
    for want in in_memory.model.graph.initializer:
        assert saved[want.name].data_type == want.data_type
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(saved[want.name]), onnx.numpy_helper.to_array(want))
    assert saved["W"].data_type == onnx.TensorProto.FLOAT16  # shared, exact in fp16: one fp16 copy
