"""The TensorRT build check: the answer's interpretation (pure), and real builds with TensorRT-RTX on this CPU.

The ``trt_build`` tests build real engines (``pip install "castguard[trt]"``: TensorRT-RTX builds ahead of time on
a CPU-only machine); without a TensorRT module they skip with :data:`NO_TRT`. CI's ``.ci/legs/30-tensorrt-rtx.sh``
installs the extra and runs them (``-m trt_build``).
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto

import test_models
from harness import ConvertOptions, collect_magnitudes, convert_model
from harness.runners.tensorrt.library import installed_module
from harness.runners.tensorrt.typed_build import (
    NodeTypes,
    ParseFailure,
    TrtBuild,
    build_from_dict,
    build_to_dict,
    check_build,
    compare_types,
    interpret,
)
from tests.helpers.graphs import make_model
from tests.helpers.trt_models import conv_transpose_net, hardswish_cnn

NO_TRT = 'no TensorRT module is installed (neither tensorrt nor tensorrt_rtx_bindings): pip install "castguard[trt]"'
requires_trt = pytest.mark.skipif(installed_module() is None, reason=NO_TRT)
HARDSWISH_SAYS = (
    "Assertion failed: (x->getType() == DataType::kFLOAT || x->getType() == DataType::kHALF || "
    "x->getType() == DataType::kINT8): Only FLOAT, HALF or INT8 input is supported for the HardSwish "
    "operator in this version of TensorRT. The current type = BF16."
)


def _bf16(model: onnx.ModelProto, *, target: str = "any") -> onnx.ModelProto:
    return convert_model(
        model,
        options=ConvertOptions(low_precision_type="bf16", target=target),
        magnitudes=collect_magnitudes(model, seed=0),
    ).model


# ---------------------------------------------------------------- the answer, interpreted (no TensorRT needed)


def test_a_parser_refusal_names_the_op_its_dtype_the_node_and_tensorrts_message() -> None:
    model = _bf16(hardswish_cnn())
    answer = {
        "stage": "parse",
        "parse_s": 0.004,
        "build_s": 0.0,
        "plan_bytes": None,
        "node_types": {},
        "parse_errors": [
            {
                "node": "/bn1/act/HardSwish",
                "op": "HardSwish",
                "desc": HARDSWISH_SAYS,
                "code": "UNSUPPORTED_NODE",
                "text": "In node 1 ...",
            }
        ],
        "log": [],
    }
    build = interpret(model, answer, backend="TensorRT-RTX 1.7.1.116")
    assert not build.ok and not build.builds and build.outcome == "parse"
    assert build.parse_failures == (ParseFailure("/bn1/act/HardSwish", "HardSwish", "bf16", HARDSWISH_SAYS),)
    assert build.summary() == (
        f"does not build in TensorRT-RTX 1.7.1.116: HardSwish (bf16) at node /bn1/act/HardSwish: {HARDSWISH_SAYS}"
    )


def test_types_are_compared_per_node_output_int64_as_int32_allowed_constants_unmapped() -> None:
    nodes = [
        onnx.helper.make_node("Constant", [], ["k"], name="k", value_int=1),
        onnx.helper.make_node("Cast", ["x"], ["h"], name="to16", to=TensorProto.FLOAT16),
        onnx.helper.make_node("Shape", ["h"], ["s"], name="shape"),
        onnx.helper.make_node("Relu", ["h"], ["y"], name="relu"),
    ]
    model = make_model(
        nodes, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT16, [2, 3]), ("s", TensorProto.INT64, [2])]
    )
    rows, changed, unmapped, compared = compare_types(model, {"to16": ["HALF"], "shape": ["INT32"], "relu": ["FLOAT"]})
    assert [r.tensorrt for r in rows] == ["", "fp16", "int32", "fp32"] and compared == 3 and unmapped == ()
    assert changed == (NodeTypes("relu", "Relu", "fp16", "fp32"),)
    answer = {
        "stage": "ok",
        "parse_s": 0.01,
        "build_s": 0.05,
        "plan_bytes": 420_000,
        "parse_errors": [],
        "log": [],
        "node_types": {"to16": ["HALF"], "shape": ["INT32"], "relu": ["FLOAT"]},
    }
    build = interpret(model, answer, backend="TensorRT 10.13.0.35")
    assert build.outcome == "types" and build.builds and not build.ok
    assert build.summary() == "TensorRT 10.13.0.35 changed types: relu (Relu): ONNX fp16, TensorRT fp32"
    assert build_from_dict(build_to_dict(build)) == build
    ok = interpret(model, {**answer, "node_types": {"to16": ["HALF"], "relu": ["HALF"]}}, backend="TensorRT 10.13.0.35")
    assert (
        ok.ok and ok.unmapped == ("shape",) and ok.summary() == "builds in TensorRT 10.13.0.35: ok, plan 0.4 MB, 0.06 s"
    )


def test_a_result_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="not a TensorRT build check result"):
        build_from_dict({"backend": "x"})
    with pytest.raises(ValueError, match="outcome must be one of"):
        TrtBuild(backend="x", outcome="maybe")


# ---------------------------------------------------------------- real builds (TensorRT-RTX on this CPU)


@pytest.mark.trt_build
@requires_trt
@pytest.mark.parametrize("name", ["mnist", "explicit_typing", "needs_constraints", "transformer_block", "if_branch"])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_every_bundled_model_builds_with_the_types_castguard_wrote(name: str, precision: str) -> None:
    model = onnx.load(str(test_models.MODELS[name].path))
    converted = convert_model(
        model, options=ConvertOptions(low_precision_type=precision), magnitudes=collect_magnitudes(model, seed=0)
    ).model
    build = check_build(converted, model_dir=Path(test_models.MODELS[name].path).parent)
    assert build.ok, build.summary()
    assert build.checked > 0 and build.plan_bytes and build.nodes_total == len(converted.graph.node)
    assert any(precision in row.tensorrt for row in build.nodes)


@pytest.mark.trt_build
@requires_trt
@pytest.mark.parametrize("target", ["any", "tensorrt"])
def test_hardswish_in_bf16_does_not_build_and_target_tensorrt_keeps_it_fp32(target: str) -> None:
    build = check_build(_bf16(hardswish_cnn(), target=target), model_dir=None, feed_shapes=[{"x": (2, 3, 16, 16)}])
    if target == "any":
        assert build.outcome == "parse"
        assert build.summary().startswith("does not build in TensorRT")
        first = build.parse_failures[0]
        assert (first.node, first.op, first.dtype) == ("/bn1/act/HardSwish", "HardSwish", "bf16")
        assert "HardSwish" in build.parse_failures[0].message and "BF16" in build.parse_failures[0].message
    else:
        assert build.ok, build.summary()
        rows = {r.node: r for r in build.nodes}
        assert rows["/bn1/act/HardSwish"].tensorrt == rows["/bn1/act/HardSwish"].onnx == "fp32"
        assert rows["/blocks/Conv"].tensorrt == "bf16"


@pytest.mark.trt_build
@requires_trt
def test_conv_transpose_in_bf16_parses_but_the_builder_fails() -> None:
    build = check_build(_bf16(conv_transpose_net()), model_dir=None)
    assert build.outcome == "build" and not build.builds, build.summary()
    assert "Could not infer output types" in build.build_error
    assert check_build(_bf16(conv_transpose_net(), target="tensorrt"), model_dir=None).ok
