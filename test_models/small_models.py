"""The small bundled models that are built in code (no training).

Each builder returns an ``onnx.ModelProto``; weights come from fixed seeds so
``python -m test_models.build`` reproduces the committed files byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .artifacts import make_model

FP16_MAX = 65504.0


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def _linear_weights(rng: np.random.Generator, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch.nn.Linear's default init: U(-1/sqrt(n_in), 1/sqrt(n_in)) for weight and bias."""
    bound = 1.0 / np.sqrt(n_in)
    weight = rng.uniform(-bound, bound, size=(n_in, n_out)).astype(np.float32)
    bias = rng.uniform(-bound, bound, size=(n_out,)).astype(np.float32)
    return weight, bias


def needs_constraints() -> onnx.ModelProto:
    """Polygraphy's ``needs_constraints.onnx``: a flip, +FP16_MAX, -FP16_MAX, a flip.

    In fp32 the output equals ``x``; if Add and Sub run in fp16 and ``x > 0``
    the sum overflows to inf and the output is wrong.
    """
    flip = np.rot90(np.identity(8, dtype=np.float32)).copy()
    nodes = [
        helper.make_node("MatMul", ["x", "flip"], ["flipped"], name="MatMul_0"),
        helper.make_node("Add", ["flipped", "fp16_max"], ["added"], name="Add"),
        helper.make_node("Sub", ["added", "fp16_max"], ["subbed"], name="Sub"),
        helper.make_node("MatMul", ["subbed", "flip"], ["y"], name="MatMul_1"),
    ]
    graph = helper.make_graph(
        nodes,
        "needs_constraints",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        initializer=[_init("flip", flip), _init("fp16_max", np.array(FP16_MAX, dtype=np.float32))],
    )
    return make_model(graph, opset=13, doc="Polygraphy examples/cli/run/08_adding_precision_constraints model")


def explicit_typing() -> onnx.ModelProto:
    """Torch-TensorRT's MyModule: the user typed linear2 fp16 with explicit casts around it."""
    rng = np.random.default_rng(2)
    w1, b1 = _linear_weights(rng, 10, 10)
    w2, b2 = _linear_weights(rng, 10, 30)
    w3, b3 = _linear_weights(rng, 30, 40)
    nodes = [
        helper.make_node("MatMul", ["x", "linear1.weight"], ["/linear1/MatMul_output_0"], name="/linear1/MatMul"),
        helper.make_node(
            "Add", ["/linear1/MatMul_output_0", "linear1.bias"], ["/linear1/Add_output_0"], name="/linear1/Add"
        ),
        helper.make_node("Cast", ["/linear1/Add_output_0"], ["/Cast_output_0"], name="/Cast", to=TensorProto.FLOAT16),
        helper.make_node(
            "MatMul", ["/Cast_output_0", "linear2.weight"], ["/linear2/MatMul_output_0"], name="/linear2/MatMul"
        ),
        helper.make_node(
            "Add", ["/linear2/MatMul_output_0", "linear2.bias"], ["/linear2/Add_output_0"], name="/linear2/Add"
        ),
        helper.make_node("Cast", ["/linear2/Add_output_0"], ["/Cast_1_output_0"], name="/Cast_1", to=TensorProto.FLOAT),
        helper.make_node(
            "MatMul", ["/Cast_1_output_0", "linear3.weight"], ["/linear3/MatMul_output_0"], name="/linear3/MatMul"
        ),
        helper.make_node("Add", ["/linear3/MatMul_output_0", "linear3.bias"], ["y"], name="/linear3/Add"),
    ]
    graph = helper.make_graph(
        nodes,
        "explicit_typing",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40])],
        initializer=[
            _init("linear1.weight", w1),
            _init("linear1.bias", b1),
            _init("linear2.weight", w2.astype(np.float16)),
            _init("linear2.bias", b2.astype(np.float16)),
            _init("linear3.weight", w3),
            _init("linear3.bias", b3),
        ],
    )
    return make_model(graph, opset=13, doc="Torch-TensorRT mixed-precision docs, 'Explicit Typing' MyModule")


def transformer_block() -> onnx.ModelProto:
    """Pre-norm single-head attention plus a hand-written norm and an MLP; x [1,8,16] -> y [1,8,16]."""
    rng = np.random.default_rng(3)
    d, hidden = 16, 32

    def mat(n_in: int, n_out: int) -> np.ndarray:
        return np.asarray(rng.standard_normal((n_in, n_out)) / np.sqrt(n_in), dtype=np.float32)

    inits = [
        _init("ln.scale", (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)),
        _init("ln.bias", (0.1 * rng.standard_normal(d)).astype(np.float32)),
        _init("wq", mat(d, d)),
        _init("wk", mat(d, d)),
        _init("wv", mat(d, d)),
        _init("wo", mat(d, d)),
        _init("attn_scale", np.array(1.0 / np.sqrt(d), dtype=np.float32)),
        _init("two", np.array(2.0, dtype=np.float32)),
        _init("eps", np.array(1e-5, dtype=np.float32)),
        _init("norm.gamma", (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)),
        _init("norm.beta", (0.1 * rng.standard_normal(d)).astype(np.float32)),
        _init("mlp.w1", mat(d, hidden)),
        _init("mlp.w2", mat(hidden, d)),
    ]
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln.scale", "ln.bias"], ["ln_out"], name="ln", axis=-1, epsilon=1e-5),
        n("MatMul", ["ln_out", "wq"], ["q"], name="q_proj"),
        n("MatMul", ["ln_out", "wk"], ["k"], name="k_proj"),
        n("MatMul", ["ln_out", "wv"], ["v"], name="v_proj"),
        n("Transpose", ["k"], ["k_t"], name="k_transpose", perm=[0, 2, 1]),
        n("MatMul", ["q", "k_t"], ["scores_raw"], name="qk"),
        n("Mul", ["scores_raw", "attn_scale"], ["scores"], name="scale"),
        n("Softmax", ["scores"], ["probs"], name="softmax", axis=-1),
        n("MatMul", ["probs", "v"], ["ctx"], name="attn_v"),
        n("MatMul", ["ctx", "wo"], ["attn_out"], name="o_proj"),
        n("Add", ["x", "attn_out"], ["h"], name="residual1"),
        n("ReduceMean", ["h"], ["mean"], name="norm_mean", axes=[-1], keepdims=1),
        n("Sub", ["h", "mean"], ["centered"], name="norm_center"),
        n("Pow", ["centered", "two"], ["sq"], name="norm_pow"),
        n("ReduceMean", ["sq"], ["var"], name="norm_var", axes=[-1], keepdims=1),
        n("Add", ["var", "eps"], ["var_eps"], name="norm_eps"),
        n("Sqrt", ["var_eps"], ["std"], name="norm_sqrt"),
        n("Div", ["centered", "std"], ["normed"], name="norm_div"),
        n("Mul", ["normed", "norm.gamma"], ["scaled"], name="norm_scale"),
        n("Add", ["scaled", "norm.beta"], ["norm_out"], name="norm_shift"),
        n("MatMul", ["norm_out", "mlp.w1"], ["mlp_h"], name="mlp_fc1"),
        n("Relu", ["mlp_h"], ["mlp_act"], name="mlp_relu"),
        n("MatMul", ["mlp_act", "mlp.w2"], ["mlp_out"], name="mlp_fc2"),
        n("Add", ["h", "mlp_out"], ["y"], name="residual2"),
    ]
    graph = helper.make_graph(
        nodes,
        "transformer_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, d])],
        initializer=inits,
    )
    return make_model(graph, opset=17, doc="One attention block with the ops usually kept in fp32")


def _scalar_const(node_name: str, output: str, value: float) -> onnx.NodeProto:
    return helper.make_node(
        "Constant",
        [],
        [output],
        name=node_name,
        value=numpy_helper.from_array(np.array(value, dtype=np.float32), output + "_value"),
    )


def if_branch() -> onnx.ModelProto:
    """``y = 3x + 1`` when ``sum(x) > 0`` else ``(x - 1) * 0.5``; the branches read ``x`` from the outer scope.

    The then-branch takes its constants from Constant nodes, the else-branch from
    subgraph initializers, so both kinds of constant appear inside a subgraph.
    """
    out_info = [1, 4]
    then_graph = helper.make_graph(
        [
            _scalar_const("then_three", "three", 3.0),
            _scalar_const("then_one", "one", 1.0),
            helper.make_node("Mul", ["x", "three"], ["then_mul"], name="then_mul"),
            helper.make_node("Add", ["then_mul", "one"], ["then_y"], name="then_add"),
        ],
        "then_branch",
        [],
        [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, out_info)],
    )
    else_graph = helper.make_graph(
        [
            helper.make_node("Sub", ["x", "else_one"], ["else_sub"], name="else_sub"),
            helper.make_node("Mul", ["else_sub", "else_half"], ["else_y"], name="else_mul"),
        ],
        "else_branch",
        [],
        [helper.make_tensor_value_info("else_y", TensorProto.FLOAT, out_info)],
        initializer=[
            _init("else_one", np.array(1.0, dtype=np.float32)),
            _init("else_half", np.array(0.5, dtype=np.float32)),
        ],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"], name="positive"),
        helper.make_node("If", ["positive"], ["y"], name="branch", then_branch=then_graph, else_branch=else_graph),
    ]
    graph = helper.make_graph(
        nodes,
        "if_branch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, out_info)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_info)],
        initializer=[_init("zero", np.array(0.0, dtype=np.float32))],
    )
    return make_model(graph, opset=13, doc="A model with an If subgraph")


BUILDERS: Mapping[str, Callable[[], onnx.ModelProto]] = MappingProxyType(
    {
        "needs_constraints": needs_constraints,
        "explicit_typing": explicit_typing,
        "transformer_block": transformer_block,
        "if_branch": if_branch,
    }
)
