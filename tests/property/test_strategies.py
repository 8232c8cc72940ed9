"""harness.search.strategies: inputs respect dtype/shape/range and reach the fp16 hazards; models are valid and varied."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from harness.core.dtypes import BFLOAT16
from harness.core.errors import UserError
from harness.runners import make_runner
from harness.search.graphbuild import MAGNITUDES
from harness.search.graphgen import OPS
from harness.search.strategies import arrays, convert_options, feeds, onnx_models, representable_range

FP16_MAX = 65504.0
SEARCH = settings(max_examples=2000, database=None, derandomize=True, phases=[Phase.generate])  # reach X?


def _model(inputs: list[tuple[str, int, list[int | str]]]) -> onnx.ModelProto:
    nodes = [helper.make_node("Identity", [name], [f"{name}_out"]) for name, _, _ in inputs]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(f"{n}_out", t, None) for n, t, _ in inputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@given(arrays(dtype=np.float16, shape=(3, 5)))
def test_fp16_arrays_stay_finite_and_keep_dtype_and_shape(a: np.ndarray) -> None:
    assert a.dtype == np.float16 and a.shape == (3, 5)
    assert np.isfinite(a).all() and np.abs(a.astype(np.float32)).max(initial=0) <= FP16_MAX


@given(arrays(dtype=np.float32, shape=(16,), val_range=(1.0, 2.0)))
def test_val_range_is_respected(a: np.ndarray) -> None:
    assert a.dtype == np.float32 and ((a >= 1.0) & (a <= 2.0)).all()


@given(arrays(dtype=BFLOAT16, shape=(4,), val_range=(-3.0, 0.1)))
def test_bf16_values_are_representable_and_in_range(a: np.ndarray) -> None:
    wide = a.astype(np.float32)
    assert a.dtype == BFLOAT16 and ((wide >= -3.0) & (wide <= 0.1)).all()


@given(
    arrays(dtype=np.int64, shape=(6,)),
    arrays(dtype=np.int32, shape=(2,), val_range=(-3, 3)),
    arrays(dtype=np.bool_, shape=(3,)),
)
def test_integer_and_bool_inputs(default: np.ndarray, ranged: np.ndarray, flags: np.ndarray) -> None:
    assert default.dtype == np.int64 and set(default.tolist()) <= {0, 1}
    assert ranged.dtype == np.int32 and ((ranged >= -3) & (ranged <= 3)).all()
    assert flags.dtype == np.bool_


@pytest.mark.parametrize(
    ("name", "hit"),
    [
        ("near +-65504", lambda a: (np.abs(a) >= 65000).any()),
        ("smallest normal 6.1e-5", lambda a: np.isin(np.abs(a), [np.float16(2.0**-14)]).any()),
        ("smallest subnormal 6e-8", lambda a: np.isin(np.abs(a), [np.float16(2.0**-24)]).any()),
        (
            "cancelling pair",
            lambda a: any(
                a[i] != 0 and abs(float(a[i]) + float(a[j])) <= abs(float(a[i])) * 1e-3
                for i in range(a.size)
                for j in range(i + 1, a.size)
            ),
        ),
        ("outliers among normal values", lambda a: np.abs(a).max() >= 1e4 and np.median(np.abs(a)) <= 1.0),
        ("power of two below 1", lambda a: any(0 < abs(v) < 1 and math.log2(abs(v)).is_integer() for v in a.tolist())),
    ],
)
def test_hazards_are_reached(name: str, hit: object) -> None:
    found = find(arrays(dtype=np.float16, shape=(8,)), hit, settings=SEARCH)  # type: ignore[arg-type]
    assert hit(found), name  # type: ignore[operator]


def test_hazards_inside_a_range_only() -> None:
    found = find(
        arrays(dtype=np.float32, shape=(8,), val_range=(-1.0, 1.0)),
        lambda a: np.isin(np.abs(a), [np.float32(2.0**-24)]).any(),
        settings=SEARCH,
    )
    assert np.abs(found).max() <= 1.0


@given(
    feeds(
        _model(
            [
                ("a", TensorProto.FLOAT16, ["batch", 3]),
                ("b", TensorProto.FLOAT, ["batch", "n"]),
                ("c", TensorProto.INT64, [2]),
            ]
        ),
        val_ranges=[("b", -1.0, 1.0)],
        dynamic_dims=(1, 3),
    )
)
def test_feeds_share_dim_params_and_honour_ranges(feed: dict[str, np.ndarray]) -> None:
    assert set(feed) == {"a", "b", "c"}
    assert feed["a"].dtype == np.float16 and feed["b"].dtype == np.float32 and feed["c"].dtype == np.int64
    assert feed["a"].shape[0] == feed["b"].shape[0] and 1 <= feed["a"].shape[0] <= 3 and 1 <= feed["b"].shape[1] <= 3
    assert np.abs(feed["b"]).max() <= 1.0 and np.isfinite(feed["a"]).all()


@given(feeds(_model([("x", TensorProto.FLOAT, ["n", 2])]), input_shapes=[("x", (5, 2))]))
def test_feeds_use_given_shapes(feed: dict[str, np.ndarray]) -> None:
    assert feed["x"].shape == (5, 2)


@pytest.mark.parametrize(
    "call",
    [
        lambda: arrays(dtype=np.float16, shape=(2,), val_range=(2.0, 1.0)),
        lambda: arrays(dtype=np.float16, shape=(-1,)),
        lambda: arrays(dtype=np.complex64, shape=(2,)),
        lambda: arrays(dtype=np.float16, shape=(2,), val_range=(1.0001, 1.0002)),
        lambda: feeds(_model([("x", TensorProto.FLOAT, [2])]), val_ranges=[("nope", 0.0, 1.0)]),
        lambda: feeds(_model([("x", TensorProto.FLOAT, [2])]), input_shapes=[("x", (3,))]),
        lambda: feeds(_model([("x", TensorProto.FLOAT, [2])]), dynamic_dims=(3, 1)),
        lambda: onnx_models(ops=("Conv",)),
        lambda: onnx_models(ops=("Frobnicate",)),
        lambda: onnx_models(max_nodes=0),
        lambda: onnx_models(opsets=(11,)),
        lambda: convert_options(precisions=("fp8",)),
    ],
)
def test_bad_arguments_fail_when_called(call: object) -> None:
    with pytest.raises(UserError):
        call()  # type: ignore[operator]


def test_representable_range_rounds_inward() -> None:
    assert representable_range(np.dtype(np.float16), None) == (-FP16_MAX, FP16_MAX)
    lo, hi = representable_range(np.dtype(np.float16), (0.1, 0.2))
    assert 0.1 <= lo <= hi <= 0.2 and np.float16(lo) == lo and np.float16(hi) == hi


@settings(max_examples=40)
@given(onnx_models())
def test_generated_models_are_valid_and_run(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    feed = {v.name: np.ones([d.dim_value for d in v.type.tensor_type.shape.dim], np.float32) for v in model.graph.input}
    outputs = make_runner("ort", model).run([feed]).outputs[0]
    assert list(outputs) == [o.name for o in model.graph.output]


@pytest.mark.parametrize("op", OPS)
def test_every_listed_op_is_generated(op: str) -> None:
    model = find(onnx_models(), lambda m: any(n.op_type == op for n in m.graph.node), settings=SEARCH)
    assert any(n.op_type == op for n in model.graph.node)


def _constants(model: onnx.ModelProto) -> list[np.ndarray]:
    values = [numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == TensorProto.FLOAT]
    values += [numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node if n.op_type == "Constant"]
    return values


@pytest.mark.parametrize(
    ("name", "hit"),
    [
        ("past 65504", lambda v: (np.abs(v) > FP16_MAX).any()),
        ("below 1e-7", lambda v: ((np.abs(v) < 1e-7) & (v != 0)).any()),
    ],
)
def test_constants_of_extreme_magnitude(name: str, hit: object) -> None:
    assert max(MAGNITUDES) > FP16_MAX and min(MAGNITUDES) < 1e-7
    model = find(onnx_models(), lambda m: any(hit(v) for v in _constants(m)), settings=SEARCH)  # type: ignore
    assert any(hit(v) for v in _constants(model)), name  # type: ignore[operator]


def test_blank_node_names_are_generated() -> None:
    model = find(onnx_models(), lambda m: all(not n.name for n in m.graph.node), settings=SEARCH)
    assert all(not n.name for n in model.graph.node)


@given(convert_options(precisions=("bf16",)), st.just(None))
def test_convert_options_respect_precisions(options: object, _: None) -> None:
    assert options.low_precision_type == "bf16"  # type: ignore[attr-defined]


def _multi_output_exposed(model: onnx.ModelProto) -> bool:
    """A node with several outputs whose later output is a graph output."""
    outputs = {o.name for o in model.graph.output}
    return any(len(n.output) > 1 and any(name in outputs for name in n.output[1:]) for n in model.graph.node)


@pytest.mark.parametrize(
    ("name", "hit"),
    [
        ("a later output is a graph output", _multi_output_exposed),
        (
            "an optional output left out",
            lambda m: any(n.op_type == "LayerNormalization" and "" in n.output for n in m.graph.node),
        ),
        (
            "Split by num_outputs",
            lambda m: any(
                n.op_type == "Split" and any(a.name == "num_outputs" for a in n.attribute) for n in m.graph.node
            ),
        ),
    ],
)
def test_multi_output_nodes_are_generated(name: str, hit: object) -> None:
    model = find(onnx_models(), hit, settings=SEARCH)  # type: ignore[arg-type]
    assert hit(model), name  # type: ignore[operator]
