"""Opset upgrades go through onnx's version converter; old IR-3 models convert; determinism; no mutation."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.core.errors import ConversionError
from tests.helpers.convert_builders import F32, init, mlp, model, node, node_types, run_ort, vi

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16


def reduce_model(opset: int) -> onnx.ModelProto:
    """ReduceSum with an `axes` attribute (opset < 13): opset 13 moves axes to an input."""
    return model(
        [node("ReduceSum", ["x"], ["s"], "sum", axes=[1], keepdims=1), node("Relu", ["s"], ["y"], "relu")],
        [vi("x", F32, [2, 4])],
        [vi("y", F32, [2, 1])],
        opset=opset,
    )


@pytest.mark.parametrize(("precision", "opset"), [("fp16", 13), ("bf16", 22)])
def test_opset_bump_uses_the_version_converter(precision: str, opset: int) -> None:
    result = convert(reduce_model(11), options=ConvertOptions(low_precision_type=precision), magnitudes=None)
    assert result.model.opset_import[0].version == opset
    reduce = next(n for n in result.model.graph.node if n.op_type == "ReduceSum")
    assert not reduce.attribute or all(a.name != "axes" for a in reduce.attribute)
    assert len(reduce.input) == 2  # axes became an input: a real conversion, not a relabel


def test_opset_never_downgraded() -> None:
    result = convert(mlp(), options=ConvertOptions(opset=11), magnitudes=None)
    assert result.model.opset_import[0].version == 17


def test_ir3_opset9_model_with_initializers_as_inputs_converts() -> None:
    """ONNX-zoo style: IR 3, opset 9, every initializer also a graph input. AutoCast rejects these."""
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    graph = model(
        [
            node("MatMul", ["x", "W"], ["m"], "mm"),
            node("Add", ["m", "B"], ["a"], "add"),
            node("Relu", ["a"], ["y"], "relu"),
        ],
        [vi("x", F32, [1, 4]), vi("W", F32, [4, 3]), vi("B", F32, [3])],
        [vi("y", F32, [1, 3])],
        [init("W", w), init("B", np.full(3, 0.1, np.float32))],
        opset=9,
        ir=3,
    )
    onnx.checker.check_model(graph)
    data = collect_magnitudes(graph)
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=data)
    assert [i.name for i in result.model.graph.input] == ["x"]
    assert result.model.ir_version >= 7 and result.model.opset_import[0].version == 13
    assert set(node_types(result.model).values()) >= {F16}
    x = np.array([[0.5, -0.25, 1.0, 0.75]], np.float32)
    (y,) = run_ort(result.model, {"x": x})
    np.testing.assert_allclose(y, np.maximum(x @ w + 0.1, 0), atol=2e-3)


def test_converter_failure_is_a_conversion_error() -> None:
    """A valid opset-7 BatchNormalization(spatial=0) has no version-converter adapter: a clear error."""
    stats = [init(n, np.full((2, 2, 2), v, np.float32)) for n, v in (("s", 1.0), ("b", 0.0), ("m", 0.0), ("v", 1.0))]
    graph = model(
        [
            node("Relu", ["x"], ["r"], "relu"),
            node("BatchNormalization", ["r", "s", "b", "m", "v"], ["y"], "bn", spatial=0),
        ],
        [vi("x", F32, [1, 2, 2, 2]), *(vi(n, F32, [2, 2, 2]) for n in "sbmv")],
        [vi("y", F32, [1, 2, 2, 2])],
        stats,
        opset=7,
        ir=3,
    )
    onnx.checker.check_model(graph)
    with pytest.raises(
        ConversionError,
        match=r"version converter cannot bring the model from opset 7 to 22 "
        r"\(bf16 needs opset 22",
    ) as err:
        convert(graph, options=ConvertOptions(low_precision_type="bf16"), magnitudes=None)
    assert err.value.step == "opset upgrade" and "opset=7" in err.value.fix


def test_convert_is_deterministic_and_does_not_mutate_its_input() -> None:
    graph = mlp()
    before = graph.SerializeToString(deterministic=True)
    data = collect_magnitudes(graph)
    options = ConvertOptions(low_precision_type="bf16", keep_io_types=True, op_types_to_exclude=("Softmax",))
    first = convert(graph, options=options, magnitudes=data).model.SerializeToString(deterministic=True)
    second = convert(graph, options=options, magnitudes=data).model.SerializeToString(deterministic=True)
    assert first == second
    assert graph.SerializeToString(deterministic=True) == before
