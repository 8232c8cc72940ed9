"""The TensorRT runner: the parts that need no GPU are tested here for real; the engine tests need a GPU.

TensorRT is never faked here (the run path's seam is tested in test_trt_run_path.py). Where no TensorRT module is
installed (the main CI legs) the RunnerUnavailable path is exercised against the real, missing import; the engine
tests need TensorRT (full, or TensorRT-RTX on a GPU of compute capability 8.0/8.6/8.9/12.x), a CUDA library and a
GPU, and skip saying which is missing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import test_models
from harness.core.dtypes import bf16_to_bits, np_dtype
from harness.core.errors import RunnerError, RunnerUnavailable
from harness.data.feeds import InputSpec
from harness.runners import make_runner
from harness.runners.tensorrt.datatypes import (
    ELEM_TO_TRT,
    TRT_TO_ELEM,
    builder_flags_to_clear,
    from_engine_array,
    host_dtype,
    network_creation_flags,
    precision_of_trt_dtype,
    to_engine_array,
    trt_version,
)
from harness.runners.tensorrt.device import open_device
from harness.runners.tensorrt.library import import_tensorrt, installed_module
from harness.runners.tensorrt.runner import TrtOptions, TrtRunner, profile_shapes

HAS_TENSORRT = installed_module() is not None
HARNESS = Path(__file__).resolve().parents[3] / "harness" / "runners" / "tensorrt"

# NetworkDefinitionCreationFlag members as the bindings expose them (tensorrt.md §2.1)
FLAGS_10X = {"EXPLICIT_BATCH": 0, "STRONGLY_TYPED": 1, "PREFER_JIT_PYTHON_PLUGINS": 2, "PREFER_AOT_PYTHON_PLUGINS": 3}
FLAGS_11X = {"STRONGLY_TYPED": 0, "PREFER_JIT_PYTHON_PLUGINS": 1, "PREFER_AOT_PYTHON_PLUGINS": 2}


def _model(name: str) -> onnx.ModelProto:
    return onnx.load(str(test_models.MODELS[name].path))


# ---------------------------------------------------------------- tensorrt missing: the real path


@pytest.mark.skipif(HAS_TENSORRT, reason="a TensorRT module is installed here; the missing-TensorRT path cannot happen")
def test_trt_runner_is_unavailable_without_tensorrt() -> None:
    runner = make_runner("trt", _model("explicit_typing"))
    assert isinstance(runner, TrtRunner)
    assert (runner.name, runner.rounds_low_precision, runner.is_active) == ("trt", True, False)
    feed = {"x": np.zeros((1, 10), np.float32)}
    with pytest.raises(RunnerUnavailable) as info:
        runner.run([feed])
    assert str(info.value) == (
        "no TensorRT is installed (neither tensorrt nor tensorrt_rtx_bindings): pip install "
        '"castguard[trt]" (TensorRT-RTX, builds on any machine), or install full TensorRT '
        "10/11 on a machine with an NVIDIA GPU"
    )
    assert not runner.is_active
    with pytest.raises(RunnerUnavailable, match="no TensorRT is installed"), runner:
        pass


def test_a_tensorrt_that_cannot_load_its_library_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tensorrt`` is imported first: an installed one whose shared library is missing (no libnvinfer) is unavailable."""
    (tmp_path / "tensorrt.py").write_text(
        "raise ImportError('libnvinfer.so.10: cannot open shared object file: No such file or directory')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    with pytest.raises(RunnerUnavailable, match="tensorrt is installed but cannot be loaded: libnvinfer.so.10"):
        import_tensorrt()
    sys.modules.pop("tensorrt", None)


# ---------------------------------------------------------------- version and flag logic


@pytest.mark.parametrize(
    ("version", "members", "flags"),
    [
        ("10.16.0.5", FLAGS_10X, 1 << 1),  # opt-in strong typing
        ("10.12.0.36", FLAGS_10X, 2),
        ("11.4.0.106", FLAGS_11X, 0),  # always strongly typed; the deprecated flag is not passed
        ("11.1.0", {}, 0),
    ],
)
def test_network_creation_flags(version: str, members: dict[str, int], flags: int) -> None:
    assert network_creation_flags(version, members) == flags


def test_tensorrt_rtx_1x_passes_the_version_gate_with_no_flag() -> None:
    """TensorRT-RTX 1.7.1's NetworkDefinitionCreationFlag has only STRONGLY_TYPED = 0; every network is strongly typed."""
    assert network_creation_flags("1.7.1.116", {"STRONGLY_TYPED": 0}, rtx=True) == 0
    with pytest.raises(RunnerUnavailable, match="too old"):
        network_creation_flags("1.7.1.116", {"STRONGLY_TYPED": 0})  # read as full TensorRT 1.7


@pytest.mark.parametrize(
    ("version", "members", "message"),
    [
        ("8.6.1.6", {"EXPLICIT_BATCH": 0}, "too old"),
        ("10.0.0", {"EXPLICIT_BATCH": 0}, "has no NetworkDefinitionCreationFlag.STRONGLY_TYPED"),
    ],
)
def test_network_creation_flags_refuse_weak_typing(version: str, members: dict[str, int], message: str) -> None:
    with pytest.raises(RunnerUnavailable, match=message):
        network_creation_flags(version, members)


def test_trt_version_parsing() -> None:
    assert trt_version("10.16.0.5") == (10, 16)
    assert trt_version("11.4.0.106") == (11, 4)
    with pytest.raises(ValueError, match="cannot read a TensorRT version"):
        trt_version("dev")


def test_tf32_is_cleared_unless_asked_for() -> None:
    flags = {"TF32": 7, "DEBUG": 0, "REFIT": 1}
    assert builder_flags_to_clear(flags, tf32=False) == ("TF32",)
    assert builder_flags_to_clear(flags, tf32=True) == ()
    assert builder_flags_to_clear({"DEBUG": 0}, tf32=False) == ()


def test_runner_never_sets_weak_typing_apis() -> None:
    """No deprecated/removed precision controls anywhere in the runner code (tensorrt.md §2.1, §2.6)."""
    source = "\n".join(
        (HARNESS / f).read_text()
        for f in ("runner.py", "datatypes.py", "plan.py", "engine.py", "device.py", "typed_build.py")
    )
    for banned in (
        "EXPLICIT_BATCH",
        "BuilderFlag.FP16",
        "BuilderFlag.BF16",
        "BuilderFlag.INT8",
        "BuilderFlag.FP8",
        "PRECISION_CONSTRAINTS",
        "set_output_type",
        "precision_is_set",
        "pycuda.autoinit",
        "set_timing_cache",
        "ComputeCapability.CURRENT",
        "set_compute_capability",
    ):
        assert banned not in source
    assert not re.search(r"\.precision\s*=", source)
    assert "pycuda.autoprimaryctx" in source and "STRONGLY_TYPED" in source and "DETAILED" in source


# ---------------------------------------------------------------- host buffers and dtypes


def test_fp32_and_fp16_inputs_pass_through_contiguous() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4).T  # not C-contiguous
    out = to_engine_array(x, "FLOAT", tensor="x")
    assert out.flags.c_contiguous and out.dtype == np.float32
    np.testing.assert_array_equal(out, x)
    half = np.array([1.5, -2.0], np.float16)
    assert to_engine_array(half, "DataType.HALF", tensor="h").dtype == np.float16


def test_bf16_travels_as_uint16_bits_both_ways() -> None:
    values = np.array([1.0, -3.140625, 65280.0, np.inf, 1e-20], dtype=ml_dtypes.bfloat16)
    bits = to_engine_array(values, "BF16", tensor="x")
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, bf16_to_bits(values))
    assert bits[0] == 0x3F80  # 1.0 in bf16
    back = from_engine_array(bits, "BF16", tensor="y")
    assert back.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(back.view(np.uint16), values.view(np.uint16))


def test_a_feed_of_the_wrong_type_is_an_error_not_a_cast() -> None:
    with pytest.raises(RunnerError, match=r"input 'x' is float32 but the engine expects HALF"):
        to_engine_array(np.zeros(3, np.float32), "HALF", tensor="x")
    with pytest.raises(RunnerError, match="expects BF16"):
        to_engine_array(np.zeros(3, np.float32), "BF16", tensor="x")


def test_fp8_io_is_refused() -> None:
    with pytest.raises(RunnerError, match="has TensorRT type FP8, which castguard cannot feed"):
        host_dtype("FP8", tensor="q")
    with pytest.raises(RunnerError, match="cannot feed"):
        to_engine_array(np.zeros(3, np.float32), "FP8", tensor="q")
    with pytest.raises(RunnerError, match="host buffer is float32, expected uint16"):
        from_engine_array(np.zeros(3, np.float32), "BF16", tensor="y")


@pytest.mark.parametrize(
    ("trt_name", "dtype"),
    [
        ("FLOAT", np.float32),
        ("HALF", np.float16),
        ("BF16", np.uint16),
        ("INT8", np.int8),
        ("UINT8", np.uint8),
        ("INT32", np.int32),
        ("INT64", np.int64),
        ("BOOL", np.bool_),
    ],
)
def test_host_dtypes(trt_name: str, dtype: type) -> None:
    assert host_dtype(trt_name, tensor="t") == np.dtype(dtype)


def test_trt_onnx_numpy_type_tables_agree() -> None:
    assert {name: ELEM_TO_TRT[elem] for name, elem in TRT_TO_ELEM.items()} == {n: n for n in TRT_TO_ELEM}
    assert TRT_TO_ELEM["HALF"] == TensorProto.FLOAT16 and TRT_TO_ELEM["BF16"] == TensorProto.BFLOAT16
    for name in ("FLOAT", "HALF", "INT8", "UINT8", "INT32", "INT64", "BOOL"):
        assert np_dtype(TRT_TO_ELEM[name]) == host_dtype(name, tensor="t")  # bf16 alone travels as bits
    assert np_dtype(TRT_TO_ELEM["BF16"]) == ml_dtypes.bfloat16


@pytest.mark.parametrize(
    ("name", "label"),
    [("HALF", "fp16"), ("DataType.BF16", "bf16"), ("float", "fp32"), ("FP8", "fp8"), ("INT64", "int64")],
)
def test_precision_of_trt_dtype(name: str, label: str) -> None:
    assert precision_of_trt_dtype(name) == label


def test_unknown_trt_dtype_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown TensorRT data type 'COMPLEX'"):
        precision_of_trt_dtype("COMPLEX")


# ---------------------------------------------------------------- optimization profiles


def test_static_inputs_need_no_profile() -> None:
    assert profile_shapes([InputSpec("x", TensorProto.FLOAT, (1, 10))], []) == {}


def test_profile_covers_every_fed_shape() -> None:
    specs = [InputSpec("ids", TensorProto.INT64, (None, None)), InputSpec("mask", TensorProto.FLOAT, (1, 8))]
    shapes = [{"ids": (2, 16), "mask": (1, 8)}, {"ids": (1, 32), "mask": (1, 8)}, {"ids": (4, 8), "mask": (1, 8)}]
    assert profile_shapes(specs, shapes) == {"ids": ((1, 8), (2, 16), (4, 32))}


def test_dynamic_inputs_without_shapes_name_the_fix() -> None:
    specs = [InputSpec("x", TensorProto.FLOAT, (None, 3))]
    with pytest.raises(RunnerError, match=r"inputs x have dynamic dims; pass TrtOptions\(input_shapes=...\)"):
        profile_shapes(specs, [])
    with pytest.raises(RunnerError, match="no shape for dynamic input 'x' in feed 0"):
        profile_shapes(specs, [{"y": (1, 3)}])
    with pytest.raises(RunnerError, match="different ranks"):
        profile_shapes(specs, [{"x": (1, 3)}, {"x": (1, 3, 1)}])


def test_options_validate_and_seed_the_profile() -> None:
    with pytest.raises(ValueError, match="optimization_level must be 0..5"):
        TrtOptions(optimization_level=9)
    with pytest.raises(ValueError, match="workspace_bytes must be positive"):
        TrtOptions(workspace_bytes=0)
    runner = TrtRunner(_model("explicit_typing"), options=TrtOptions(input_shapes=(("x", (1, 10)),)))
    assert runner.options.tf32 is False and runner.options.plugins == ()
    assert runner.plan is None and runner.precision_report is None
    with pytest.raises(RunnerError, match="run at least one inference first"):
        runner.check_precisions()


# ---------------------------------------------------------------- with TensorRT (skipped here)


@pytest.fixture(scope="module")
def tensorrt_ready() -> Iterator[None]:
    """TensorRT, a CUDA library and a CUDA device, or a skip that says which one is missing. (An unsupported GPU
    skips in the test itself, through the runner's own engine-validity check.)"""
    try:
        import_tensorrt()
        open_device().close()
        with TrtRunner(_model("explicit_typing")):  # an unsupported GPU: the runner's validity check says so
            pass
    except RunnerUnavailable as err:
        pytest.skip(str(err))
    yield


@pytest.mark.trt
def test_explicit_typing_engine_matches_ort_fp32(tensorrt_ready: None) -> None:
    import onnxruntime as ort

    model = _model("explicit_typing")
    x = np.random.default_rng(0).uniform(-1, 1, (1, 10)).astype(np.float32)
    (gold,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with TrtRunner(model) as runner:
        assert runner.is_active and runner.name.startswith("trt-")
        first = runner.infer({"x": x})
        second = runner.infer({"x": x})  # buffers are reused
    np.testing.assert_array_equal(first["y"], second["y"])
    result = TrtRunner(model).run([{"x": x}])
    assert result.runner.startswith("trt-") and result.rounds_low_precision
    np.testing.assert_allclose(result.outputs[0]["y"], gold, rtol=5e-3, atol=5e-3)


@pytest.mark.trt
def test_engine_report_matches_onnx_types(tensorrt_ready: None) -> None:
    runner = TrtRunner(_model("explicit_typing"))
    runner.run([{"x": np.ones((1, 10), np.float32)}])
    assert runner.plan and runner.inspector_json and runner.precision_report is not None
    assert runner.precision_report.detailed
    assert "fp16" in runner.precision_report.histogram()
    assert any("HALF" in layer.output_types for layer in runner.network_layers)
    assert runner.check_precisions() == []


@pytest.mark.trt
def test_needs_constraints_in_fp16_loses_x(tensorrt_ready: None) -> None:
    """Add/Sub typed fp16 in the ONNX: a strongly typed engine must run them in fp16 and lose x."""
    model = _model("needs_constraints")
    graph = model.graph
    graph.node.insert(1, helper.make_node("Cast", ["flipped"], ["flipped16"], name="to16", to=TensorProto.FLOAT16))
    graph.node[2].input[:] = ["flipped16", "fp16_max_h"]
    graph.node[3].input[:] = ["added", "fp16_max_h"]
    graph.node[3].output[:] = ["subbed16"]
    graph.node.insert(4, helper.make_node("Cast", ["subbed16"], ["subbed"], name="to32", to=TensorProto.FLOAT))
    graph.initializer.append(numpy_helper.from_array(np.array(65504, np.float16), "fp16_max_h"))
    onnx.checker.check_model(model, full_check=True)
    x = np.random.default_rng(1).uniform(1, 2, (1, 8)).astype(np.float32)
    out = TrtRunner(model).run([{"x": x}]).outputs[0]["y"]
    assert not np.allclose(out, x, atol=1e-2)


@pytest.mark.trt
def test_bf16_io_round_trips(tensorrt_ready: None) -> None:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"], name="add")],
        "bf16_add",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 4])],
        initializer=[helper.make_tensor("one", TensorProto.BFLOAT16, [], [1.0])],
    )
    model = helper.make_model_gen_version(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4).astype(ml_dtypes.bfloat16)
    y = TrtRunner(model).run([{"x": x}]).outputs[0]["y"]
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y, (x.astype(np.float32) + 1).astype(ml_dtypes.bfloat16))
