"""Fuzz the converter with random valid models, settings and inputs (harness.search.strategies); see converter_contract.

One test per precision, defined with a quick test between them so that xdist's first split of this file's
four tests puts them on different workers: ``pytest -n 2`` runs them side by side (the nightly profile's 5000
examples each make 10,000 generated models). Each ``@example`` is a failure the fuzzing found, kept as a regression.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import example, given
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, Magnitudes, collect_magnitudes, convert
from harness.core.errors import ConversionError
from tests.helpers.converter_contract import ContractCase, cases, check_contract

F32 = TensorProto.FLOAT


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[tuple[str, list[int]]],
    outputs: list[tuple[str, list[int]]],
    inits: dict[str, np.ndarray],
    *,
    opset: int = 13,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "regression",
        [helper.make_tensor_value_info(n, F32, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F32, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


# Found by test_converter_contract_fp16: a graph output whose FP32 values pass 65504 became an fp16 output
# (keep_io_types=False) and held inf although its producer was kept FP32 (init_max). The converter now refuses
# with a ConversionError naming the output (harness.convert.refusals.check_io_range).
OUTPUT_OVERFLOW = ContractCase(
    model=_model(
        [
            helper.make_node(
                "LayerNormalization", ["x0", "c1"], ["t2"], name="LayerNormalization_2", axis=0, epsilon=1e-5
            ),
            helper.make_node("Add", ["x0", "c3"], ["t4"], name="Add_4"),
        ],
        [("x0", [3])],
        [("t4", [3])],
        {"c1": [0.137, -0.230, -0.459], "c3": -496112.88},
        opset=17,
    ),
    options=ConvertOptions(),
    feed={"x0": np.zeros(3, np.float32)},
)

# Found by test_converter_contract_bf16 (a false alarm of the data_max check, kept so the check stays right):
# Pow kept FP32 for its inf output reads its exponent from a bf16 tensor through Pow's second type variable;
# the node computes in fp32, so it is not a low-precision node.
POW_EXPONENT = ContractCase(
    model=_model(
        [
            helper.make_node("Exp", ["x1"], ["t2"], name="Exp_1"),
            helper.make_node("Pow", ["c3", "t2"], ["t4"], name="Pow_2"),
            helper.make_node("Mul", ["x1", "t4"], ["t5"], name="Mul_3"),
        ],
        [("x1", [4])],
        [("t5", [4])],
        {"c3": [-0.5647822]},
    ),
    options=ConvertOptions(low_precision_type="bf16", keep_io_types=True),
    feed={"x1": np.array([-0.9995, -0.5705, -9.5e-07, 1.0], np.float32)},
)

# Found by reasoning about the inf/NaN property (2,800 random models had not hit it), confirmed by this hand-built
# case: Mul(x, 5e-8) ran in fp16 (all its values are tiny) and flushed most of its output to zero; the FP32 Div reading it as a denominator made inf. The converter
# now keeps a Div whose magnitudes prove a denominator below fp16's smallest normal, and that denominator's
# producer, in FP32 (harness.convert.classify, rule 7).
DIV_UNDERFLOW = ContractCase(
    model=_model(
        [
            helper.make_node("Mul", ["x", "c"], ["m"], name="mul"),
            helper.make_node("Div", ["x", "m"], ["y"], name="div"),
        ],
        [("x", [4])],
        [("y", [4])],
        {"c": 5e-8},
        opset=17,
    ),
    options=ConvertOptions(keep_io_types=True),
    feed={"x": np.array([0.5, -0.25, 1.0, 0.125], np.float32)},
)

# Found by the nightly profile (seed 20261121, after 725 models): Add(x, 1.37e-8) ran in fp16, where 1.37e-8
# rounds to 0, so x = 0 gave 0/0 = NaN in the Div that FP32 computes as 0/1.37e-8 = 0. Rule 7 now also keeps a
# Div whose denominator is tiny everywhere (max |b| below fp16's smallest normal) in FP32, with its producer.
ZERO_OVER_TINY = ContractCase(
    model=_model(
        [
            helper.make_node("Add", ["x0", "x0"], ["t1"], name="Add_1"),
            helper.make_node("Relu", ["x0"], ["t2"], name="Relu_2"),
            helper.make_node("Add", ["x0", "c3"], ["t4"], name="Add_4"),
            helper.make_node("Div", ["x0", "t4"], ["t5"], name="Div_5"),
        ],
        [("x0", [1]), ("x1", [1])],
        [("t5", [1])],
        {"c3": 1.3696169e-08},
    ),
    options=ConvertOptions(),
    feed={"x0": np.zeros(1, np.float32), "x1": np.zeros(1, np.float32)},
)

# Found by the nightly profile once ZERO_OVER_TINY was fixed (same seed, again after 726 models): x1 = [1, 0], so
# x1 + 1.37e-8 is 1 at most but 1.37e-8 at one element, which fp16 flushes: 0/0 = NaN. Magnitudes now also record
# each tensor's smallest non-zero |x| (absmin), and rule 7 reads it.
PARTLY_TINY = ContractCase(
    model=_model(
        [
            helper.make_node("Add", ["x1", "c3"], ["t4"], name="Add_4"),
            helper.make_node("Div", ["x0", "t4"], ["t5"], name="Div_5"),
        ],
        [("x0", [1]), ("x1", [2])],
        [("t5", [2])],
        {"c3": 1.3696169e-08},
    ),
    options=ConvertOptions(),
    feed={"x0": np.zeros(1, np.float32), "x1": np.array([1.0, 0.0], np.float32)},
)

# Found by reasoning after PARTLY_TINY (the random search had not hit it): Pow(x + 1.37e-8, -1) divides just
# the same; rule 7 treats the base of a Pow whose exponent may be negative as a denominator.
POW_NEGATIVE = ContractCase(
    model=_model(
        [
            helper.make_node("Add", ["x", "c"], ["m"], name="add"),
            helper.make_node("Pow", ["m", "e"], ["y"], name="pow"),
        ],
        [("x", [2])],
        [("y", [2])],
        {"c": 1.37e-8, "e": -1.0},
    ),
    options=ConvertOptions(keep_io_types=True),
    feed={"x": np.array([1.0, 0.0], np.float32)},
)


@given(case=cases(precision="fp16"))
@example(case=OUTPUT_OVERFLOW)
@example(case=DIV_UNDERFLOW)
@example(case=ZERO_OVER_TINY)
@example(case=PARTLY_TINY)
@example(case=POW_NEGATIVE)
def test_converter_contract_fp16(case: ContractCase) -> None:
    check_contract(case)


def test_a_tiny_denominator_keeps_the_div_and_its_producer_fp32() -> None:
    magnitudes = collect_magnitudes(DIV_UNDERFLOW.model, feeds=[DIV_UNDERFLOW.feed])
    result = convert(DIV_UNDERFLOW.model, options=DIV_UNDERFLOW.options, magnitudes=magnitudes)
    reasons = dict(result.high_nodes)
    assert reasons["mul"].startswith("denominator: 'm' of Div 'div' reaches 6.25e-09") and "div" in reasons
    assert check_contract(DIV_UNDERFLOW) is not None
    zero = convert(
        ZERO_OVER_TINY.model,
        options=ZERO_OVER_TINY.options,
        magnitudes=collect_magnitudes(ZERO_OVER_TINY.model, feeds=[ZERO_OVER_TINY.feed]),
    )
    assert dict(zero.high_nodes)["Add_4"].startswith("denominator: 't4' of Div 'Div_5' reaches 1.37e-08")
    assert check_contract(ZERO_OVER_TINY) is not None
    partly = collect_magnitudes(PARTLY_TINY.model, feeds=[PARTLY_TINY.feed])
    assert partly.absmin["t4"] == pytest.approx(1.3696169e-08) and partly.absmax["t4"] == pytest.approx(1.0)
    assert Magnitudes.from_json(partly.to_json()) == partly
    assert "Add_4" in dict(convert(PARTLY_TINY.model, options=PARTLY_TINY.options, magnitudes=partly).high_nodes)
    assert check_contract(PARTLY_TINY) is not None
    power = convert(
        POW_NEGATIVE.model,
        options=POW_NEGATIVE.options,
        magnitudes=collect_magnitudes(POW_NEGATIVE.model, feeds=[POW_NEGATIVE.feed]),
    )
    assert dict(power.high_nodes)["add"].startswith("denominator: 'm' of Pow 'pow'")
    assert check_contract(POW_NEGATIVE) is not None


@given(case=cases(precision="bf16"))
@example(case=POW_EXPONENT)
def test_converter_contract_bf16(case: ContractCase) -> None:
    check_contract(case)


def test_output_overflow_is_refused_with_the_output_named() -> None:
    magnitudes = collect_magnitudes(OUTPUT_OVERFLOW.model, feeds=[OUTPUT_OVERFLOW.feed])
    with pytest.raises(ConversionError, match=r"(?s)graph output 't4' reaches 496113 .*keep_io_types=True"):
        convert(OUTPUT_OVERFLOW.model, options=ConvertOptions(), magnitudes=magnitudes)
    kept = convert(OUTPUT_OVERFLOW.model, options=ConvertOptions(keep_io_types=True), magnitudes=magnitudes)
    assert [o.type.tensor_type.elem_type for o in kept.model.graph.output] == [F32]
    assert check_contract(OUTPUT_OVERFLOW) is None
