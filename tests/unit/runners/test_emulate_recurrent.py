"""emulate and recurrent ops (issue 32.9): LSTM, GRU and RNN carry their state across steps inside one op, so
emulate, which rounds each op's outputs, would round their state only at the end and read optimistic. It says so
and refuses them when they run in fp16/bf16, naming ``--runner reference``; the reference runner runs the same
model; kept FP32 (``op_types_to_exclude``), emulate runs it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.core.errors import RunnerError
from harness.runners import make_runner
from tests.helpers.graphs import make_model

T, B, IN, H = 12, 1, 4, 8
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def recurrent_model(op: str) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = (0.5 * rng.normal(size=(1, GATES[op] * H, IN))).astype(np.float32)
    r = (0.5 * rng.normal(size=(1, GATES[op] * H, H))).astype(np.float32)
    nodes = [
        helper.make_node(op, ["x", "W", "R"], ["Y", "Yh"], hidden_size=H, name="recurrent"),
        helper.make_node("Relu", ["Yh"], ["y"], name="relu"),
    ]
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    return make_model(
        nodes, [("x", TensorProto.FLOAT, [T, B, IN])], [("y", TensorProto.FLOAT, [1, B, H])], initializers=inits
    )


def converted(op: str, *, exclude: tuple[str, ...] = (), precision: str = "fp16") -> onnx.ModelProto:
    model = recurrent_model(op)
    feeds = [{"x": np.random.default_rng(1).uniform(-1, 1, (T, B, IN)).astype(np.float32)}]
    options = ConvertOptions(keep_io_types=True, op_types_to_exclude=exclude, low_precision_type=precision)
    return convert(model, options=options, magnitudes=collect_magnitudes(model, feeds=feeds)).model


FEEDS = [{"x": np.random.default_rng(2).uniform(-1, 1, (T, B, IN)).astype(np.float32)}]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("op", sorted(GATES))
def test_emulate_refuses_low_precision_recurrent_ops_and_names_reference(op: str, precision: str) -> None:
    model = converted(op, precision=precision)
    assert any(n.op_type == op for n in model.graph.node)
    with pytest.raises(RunnerError, match=rf"'recurrent' \({op}\) runs in {precision}") as err:
        make_runner("emulate", model).run(FEEDS)
    assert "--runner reference" in str(err.value) and "every step" in str(err.value)
    outputs = make_runner("reference", model).run(FEEDS).outputs[0]
    assert np.isfinite(np.asarray(outputs["y"], dtype=np.float32)).all()


@pytest.mark.parametrize("op", sorted(GATES))
def test_emulate_runs_recurrent_ops_kept_fp32(op: str) -> None:
    model = converted(op, exclude=(op,))
    golden = make_runner("ort", recurrent_model(op)).run(FEEDS).outputs[0]["y"]
    got = make_runner("emulate", model).run(FEEDS).outputs[0]["y"]
    assert np.allclose(got, golden, atol=1e-2)
