"""A LLaMA-style decoder block built in code (not a test module): embedding, one attention with a -FLT_MAX
causal-mask fill (Constant + Where + Add, as torch exports it), Softmax, an MLP, and a final RMSNorm whose x**2
overflows fp16 (the issue 23 case: at data_max inf the fp16 conversion fails because of the RMSNorm, not the
mask fill, which Softmax absorbs)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.helpers.graphs import make_model

VOCAB, SEQ, DIM = 32, 8, 16
MASK_FILL = "/m/model/Constant_28"
NORM_NODES = ("/m/norm/Pow", "/m/norm/ReduceMean", "/m/norm/Add", "/m/norm/Sqrt")


def llama_model(*, seed: int = 0, up_scale: float = 150.0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...], scale: float) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        weight("embed", (VOCAB, DIM), 0.5),
        weight("wq", (DIM, DIM), DIM**-0.5),
        weight("wk", (DIM, DIM), DIM**-0.5),
        weight("wv", (DIM, DIM), DIM**-0.5),
        weight("wo", (DIM, DIM), DIM**-0.5),
        weight("w_up", (DIM, DIM), up_scale * DIM**-0.5),
        weight("w_lm", (DIM, VOCAB), DIM**-0.5),
        numpy_helper.from_array(np.full(DIM, 1.0, np.float32), "gamma"),
        numpy_helper.from_array(np.array(DIM**-0.5, np.float32), "inv_sqrt_d"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
    ]
    causal = np.tril(np.ones((SEQ, SEQ), dtype=bool))
    flt_min = float(np.finfo(np.float32).min)
    node = helper.make_node
    nodes = [
        node("Gather", ["embed", "input_ids"], ["h"], name="/m/model/embed_tokens/Gather"),
        node("MatMul", ["h", "wq"], ["q"], name="/m/attn/q_proj/MatMul"),
        node("MatMul", ["h", "wk"], ["k"], name="/m/attn/k_proj/MatMul"),
        node("MatMul", ["h", "wv"], ["v"], name="/m/attn/v_proj/MatMul"),
        node("Transpose", ["k"], ["kt"], name="/m/attn/Transpose", perm=[0, 2, 1]),
        node("MatMul", ["q", "kt"], ["scores"], name="/m/attn/MatMul"),
        node("Mul", ["scores", "inv_sqrt_d"], ["scaled"], name="/m/attn/Mul"),
        node(
            "Constant",
            [],
            ["/m/model/Constant_28_output_0"],
            name=MASK_FILL,
            value=helper.make_tensor("fill", TensorProto.FLOAT, [], [flt_min]),
        ),
        node(
            "Constant",
            [],
            ["zero_out"],
            name="/m/model/Constant_29",
            value=helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
        ),
        node("Constant", [], ["causal"], name="/m/model/Constant_30", value=numpy_helper.from_array(causal, "causal")),
        node("Where", ["causal", "zero_out", "/m/model/Constant_28_output_0"], ["mask"], name="/m/model/Where"),
        node("Add", ["scaled", "mask"], ["masked"], name="/m/attn/Add"),
        node("Softmax", ["masked"], ["probs"], name="/m/attn/Softmax", axis=-1),
        node("MatMul", ["probs", "v"], ["ctx"], name="/m/attn/MatMul_1"),
        node("MatMul", ["ctx", "wo"], ["o"], name="/m/attn/o_proj/MatMul"),
        node("Add", ["h", "o"], ["h2"], name="/m/model/Add"),
        node("MatMul", ["h2", "w_up"], ["x"], name="/m/mlp/up_proj/MatMul"),
        node("Pow", ["x", "two"], ["x2"], name=NORM_NODES[0]),
        node("ReduceMean", ["x2"], ["ms"], name=NORM_NODES[1], axes=[-1], keepdims=1),
        node("Add", ["ms", "eps"], ["ms_eps"], name=NORM_NODES[2]),
        node("Sqrt", ["ms_eps"], ["rms"], name=NORM_NODES[3]),
        node("Div", ["one", "rms"], ["inv_rms"], name="/m/norm/Div"),
        node("Mul", ["x", "inv_rms"], ["normed"], name="/m/norm/Mul"),
        node("Mul", ["normed", "gamma"], ["scaled_norm"], name="/m/norm/Mul_1"),
        node("MatMul", ["scaled_norm", "w_lm"], ["logits"], name="/m/lm_head/MatMul"),
    ]
    return make_model(
        nodes,
        [("input_ids", TensorProto.INT64, [1, SEQ])],
        [("logits", TensorProto.FLOAT, [1, SEQ, VOCAB])],
        initializers=inits,
    )


def llama_feeds(seed: int = 0) -> list[dict[str, np.ndarray]]:
    return [{"input_ids": np.random.default_rng(seed).integers(0, VOCAB, (1, SEQ)).astype(np.int64)}]
