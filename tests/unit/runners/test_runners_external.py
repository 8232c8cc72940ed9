"""Runners on lazily loaded models: onnxruntime reads the weights from the model's folder or a temporary
external-data file; emulate widens on disk; reference refuses big external weights clearly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.convert import ConvertOptions, convert
from harness.core.errors import RunnerUnavailable
from harness.data.onnxfile import external_tensors, has_pending_casts, load_model
from harness.data.onnxsave import save_model
from harness.runners import make_runner
from harness.runners import reference as reference_runner
from harness.runners.ortsource import session_source
from tests.helpers.external import matmul_stack, save_external

FEED = {"x": np.random.default_rng(3).standard_normal((1, 512)).astype(np.float32)}


@pytest.fixture
def ext_path(tmp_path: Path) -> Path:
    return save_external(matmul_stack(), tmp_path / "m" / "stack.onnx")


def test_ort_reads_lazy_weights_from_the_model_folder(ext_path: Path, tmp_path: Path) -> None:
    lazy = load_model(ext_path, weights="lazy")
    source = session_source(lazy, model_dir=ext_path.parent, scratch=tmp_path, options=None)
    assert isinstance(source, bytes) and len(source) < 10_000  # the graph only, not 4 MiB of weights
    got = make_runner("ort", lazy, model_dir=ext_path.parent).run([FEED]).outputs[0]["y"]
    want = make_runner("ort", load_model(ext_path)).run([FEED]).outputs[0]["y"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("runner", ["emulate", "reference", "ort"])
def test_a_lazy_conversion_runs_saved_or_pending_and_matches_in_memory(
    ext_path: Path, tmp_path: Path, runner: str
) -> None:
    options = ConvertOptions(data_max=float("inf"), keep_io_types=True)
    eager = convert(load_model(ext_path), options=options, magnitudes=None)
    lazy = convert(load_model(ext_path, weights="lazy"), options=options, magnitudes=None, base_dir=ext_path.parent)
    assert has_pending_casts(lazy.model)
    want = make_runner(runner, eager.model).run([FEED]).outputs[0]["y"]
    pending = make_runner(runner, lazy.model, model_dir=lazy.base_dir).run([FEED]).outputs[0]["y"]
    save_model(lazy.model, tmp_path / "out" / "conv.onnx", base_dir=lazy.base_dir)
    saved = load_model(tmp_path / "out" / "conv.onnx", weights="lazy")
    assert len(external_tensors(saved)) == 4 and not has_pending_casts(saved)
    from_file = make_runner(runner, saved, model_dir=tmp_path / "out").run([FEED]).outputs[0]["y"]
    np.testing.assert_array_equal(pending, want)
    np.testing.assert_array_equal(from_file, want)


def test_reference_refuses_big_external_weights(ext_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_runner, "MAX_EXTERNAL_BYTES", 1 << 20)  # the test setting: 1 MiB
    runner = make_runner("reference", load_model(ext_path, weights="lazy"), model_dir=ext_path.parent)
    with pytest.raises(RunnerUnavailable, match=r"onnx.reference is not useful .* use --runner emulate"):
        runner.run([FEED])


def test_emulate_widens_a_lazy_fp16_model_on_disk(ext_path: Path, tmp_path: Path) -> None:
    fp16 = convert(
        load_model(ext_path, weights="lazy"),
        options=ConvertOptions(data_max=float("inf")),
        magnitudes=None,
        base_dir=ext_path.parent,
    )
    save_model(fp16.model, tmp_path / "f" / "h.onnx", base_dir=fp16.base_dir)
    lazy = load_model(tmp_path / "f" / "h.onnx", weights="lazy")
    assert [t.data_type for t in external_tensors(lazy)] == [onnx.TensorProto.FLOAT16] * 4
    feed = {"x": FEED["x"].astype(np.float16)}
    got = make_runner("emulate", lazy, model_dir=tmp_path / "f").run([feed]).outputs[0]["y"]
    want = make_runner("emulate", load_model(tmp_path / "f" / "h.onnx")).run([feed]).outputs[0]["y"]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("runner", ["ort", "emulate"])
def test_big_in_memory_weights_go_to_onnxruntime_as_arrays_and_give_the_same_outputs(
    ext_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: str
) -> None:
    """Above SHARED_WEIGHTS_ABOVE (here 0), in-memory weights are handed over as external initializers: the
    bytes onnxruntime parses are the graph's only, the outputs are the serialized model's exactly, and the
    arrays outlive everything but the session (a collection in between must not free them). A host session gets
    them from a scratch file instead (onnxruntime copies arrays): its outputs are the same."""
    import gc

    import onnxruntime as ort

    from harness.runners import ort as ort_module
    from harness.runners import ortsource

    model = load_model(ext_path)  # 4 MiB of weights, in memory
    want = make_runner(runner, model).run([FEED]).outputs[0]["y"]  # the model serialized, weights and all
    want_ort = make_runner("ort", model).run([FEED]).outputs[0]["y"]
    monkeypatch.setattr(ortsource, "SHARED_WEIGHTS_ABOVE", 0)
    options, keep = ort.SessionOptions(), []
    source = session_source(model, model_dir=None, scratch=tmp_path, options=options, keep=keep)
    assert isinstance(source, bytes) and len(source) < 10_000 and len(keep) == 4
    session = ort_module.create_session(model, providers=("CPUExecutionProvider",), runner="test")
    gc.collect()
    got = ort_module.run_session(session, FEED, runner="test")["y"]
    np.testing.assert_array_equal(got, want_ort)
    np.testing.assert_array_equal(make_runner(runner, model).run([FEED]).outputs[0]["y"], want)
