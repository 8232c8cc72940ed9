"""Runner lifecycle, registry, provenance and bf16 I/O (emulate has its own file)."""

from __future__ import annotations

import importlib.util
import sys

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.core.errors import InputDataError, RunnerError, RunnerUnavailable, UserError
from harness.runners import RUNNER_NAMES, make_runner
from tests.helpers.graphs import make_model, mlp_model

X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)


@pytest.mark.parametrize(
    ("name", "label", "rounds"),
    [("ort", "ort[CPUExecutionProvider]", False), ("emulate", "emulate", True), ("reference", "reference", True)],
)
def test_run_records_the_producer(name: str, label: str, rounds: bool) -> None:
    result = make_runner(name, mlp_model()).run([{"x": X}, {"x": -X}])
    assert result.runner == label and result.rounds_low_precision is rounds
    assert len(result.outputs) == 2 and result.outputs[0]["y"].shape == (1, 4)
    assert result.seconds >= 0.0


def test_fp32_runners_agree_on_an_fp32_model() -> None:
    outs = {n: make_runner(n, mlp_model()).run([{"x": X}]).outputs[0]["y"] for n in ("ort", "emulate", "reference")}
    np.testing.assert_allclose(outs["emulate"], outs["ort"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outs["reference"], outs["ort"], rtol=1e-5, atol=1e-5)


def test_lifecycle_is_enforced() -> None:
    runner = make_runner("ort", mlp_model())
    with pytest.raises(RunnerError, match="activate"):
        runner.infer({"x": X})
    with runner:
        assert runner.is_active
        with pytest.raises(RunnerError, match="twice"):
            runner.activate()
        np.testing.assert_allclose(runner.infer({"x": X})["y"], runner.infer({"x": X})["y"])
    assert not runner.is_active


def test_infer_validates_the_feed() -> None:
    with make_runner("ort", mlp_model()) as runner:
        with pytest.raises(InputDataError, match="dtype float64"):
            runner.infer({"x": X.astype(np.float64)})
        with pytest.raises(InputDataError, match="names do not match"):
            runner.infer({"input": X})


def test_unknown_runner_is_a_user_error() -> None:
    with pytest.raises(UserError, match="use one of: ort, ort-cuda, emulate, reference, trt"):
        make_runner("tensorrt", mlp_model())
    assert RUNNER_NAMES == ("ort", "ort-cuda", "emulate", "reference", "trt")


def test_missing_provider_is_unavailable_not_a_crash() -> None:
    runner = make_runner("ort", mlp_model(), providers=["NoSuchExecutionProvider"])
    assert runner.name == "ort[NoSuchExecutionProvider]" and runner.rounds_low_precision
    with pytest.raises(RunnerUnavailable, match="NoSuchExecutionProvider"):
        runner.run([{"x": X}])


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="TensorRT is installed here")
def test_trt_without_tensorrt_is_unavailable() -> None:
    with pytest.raises(RunnerUnavailable):
        make_runner("trt", mlp_model()).run([{"x": X}])


def test_ort_bf16_io_travels_as_uint16_bits() -> None:
    bf16 = TensorProto.BFLOAT16
    model = make_model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], [("x", bf16, [2, 3])], [("y", bf16, [3, 2])]
    )
    x = np.array([[1.5, -2.25, 3e38], [0.1, 7.0, -0.0]], dtype=ml_dtypes.bfloat16)
    y = make_runner("ort", model).run([{"x": x}]).outputs[0]["y"]
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.view(np.uint16), x.T.view(np.uint16))


def test_ort_error_while_running_is_a_runner_error() -> None:
    model = make_model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [("x", TensorProto.FLOAT, [2, 3]), ("s", TensorProto.INT64, [2])],
        [("y", TensorProto.FLOAT, ["a", "b"])],
    )
    with pytest.raises(RunnerError, match="onnxruntime failed while running"):
        make_runner("ort", model).run([{"x": np.zeros((2, 3), np.float32), "s": np.array([4, 4], np.int64)}])


def test_a_run_s_outputs_keep_only_themselves_of_the_session_s_arena() -> None:
    """run_session hands back onnxruntime's own output buffers (no copy) and asks the run to shrink the CPU arena
    as it ends, so the outputs do not keep the run's intermediates alive: the option reaches onnxruntime and the
    outputs are still right after the session is gone."""
    from harness.runners.ort import create_session, run_session

    session = create_session(mlp_model(), providers=("CPUExecutionProvider",), runner="ort")
    seen: list[str] = []
    real = session.run_with_ort_values

    def run(names: list[str], feeds: dict[str, object], options: object) -> object:
        seen.append(options.get_run_config_entry("memory.enable_memory_arena_shrinkage"))  # type: ignore[attr-defined]
        return real(names, feeds, options)

    session.run_with_ort_values = run
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    expected = make_runner("ort", mlp_model()).run([{"x": x}]).outputs[0]
    got = run_session(session, {"x": x}, runner="ort")
    del session
    assert seen == ["cpu:0"]
    assert got.keys() == expected.keys() and all(np.array_equal(got[k], expected[k]) for k in got)


def _rss() -> int:
    from harness.core.memory import give_back_freed

    give_back_freed()
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_cpu_session_of_an_in_memory_model_holds_its_weights_once() -> None:
    """onnxruntime copies weights handed over as external initializers, so a CPU session of an in-memory model with
    64 MB of weights held 128 MB for its life (castguard's arrays and onnxruntime's copy); it now loads them from a
    scratch file, and holds onnxruntime's copy only. Its outputs are the model's."""
    from harness.runners.ort import create_session, run_session

    rows, cols = 4096, 4096
    weight = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [("x", TensorProto.FLOAT, [2, rows])],
        [("y", TensorProto.FLOAT, [2, cols])],
        initializers=[numpy_helper.from_array(weight, "w")],
    )
    create_session(mlp_model(), providers=("CPUExecutionProvider",), runner="ort")  # onnxruntime's own start-up
    before = _rss()
    session = create_session(model, providers=("CPUExecutionProvider",), runner="ort")
    grown = _rss() - before
    assert grown < 1.4 * weight.nbytes, f"{grown >> 20} MB for {weight.nbytes >> 20} MB of weights"
    x = np.random.default_rng(1).standard_normal((2, rows)).astype(np.float32)
    np.testing.assert_allclose(run_session(session, {"x": x}, runner="ort")["y"], x @ weight, rtol=1e-4, atol=1e-3)


def test_a_full_temporary_folder_gives_the_session_its_weights_as_arrays_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where the scratch file cannot be written (a full $TMPDIR), the session still gets made, from arrays, and a
    warning names the folder and the error; its outputs are the model's."""
    from harness.runners import ortsource
    from harness.runners.ort import create_session, run_session

    weight = np.random.default_rng(0).standard_normal((1024, 512)).astype(np.float32)  # 2 MB: above the 1 MB line
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [("x", TensorProto.FLOAT, [1, 1024])],
        [("y", TensorProto.FLOAT, [1, 512])],
        initializers=[numpy_helper.from_array(weight, "w")],
    )

    def full(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ortsource, "save_for_session", full)
    with caplog.at_level("WARNING", logger="harness.runners"):
        session = create_session(model, providers=("CPUExecutionProvider",), runner="ort")
    assert "onnxruntime gets the weights as arrays" in caplog.text and "No space left on device" in caplog.text
    x = np.random.default_rng(1).standard_normal((1, 1024)).astype(np.float32)
    np.testing.assert_allclose(run_session(session, {"x": x}, runner="ort")["y"], x @ weight, rtol=1e-4, atol=1e-3)
