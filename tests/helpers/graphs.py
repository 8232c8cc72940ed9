"""Small real ONNX graphs built in code for the harness-core tests (not a test module)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10  # onnxruntime 1.31 reads IR <= 13; onnx 1.23 would write 14 by default


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, int, Sequence[int | str | None]]],
    outputs: Sequence[tuple[str, int, Sequence[int | str | None] | None]],
    *,
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model


def fp16_max_model(elem: int = TensorProto.FLOAT16, n: int = 8) -> onnx.ModelProto:
    """Seed 003: x -> MatMul(rot90 I) -> Add(65504) -> Sub(65504) -> MatMul(rot90 I) -> y, all in ``elem``."""
    np_t = helper.tensor_dtype_to_np_dtype(elem)
    flip = np.rot90(np.eye(n)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "flip"], ["a"], name="MatMul_0"),
        helper.make_node("Add", ["a", "big"], ["b"], name="Add"),
        helper.make_node("Sub", ["b", "big"], ["c"], name="Sub"),
        helper.make_node("MatMul", ["c", "flip"], ["y"], name="MatMul_1"),
    ]
    inits = [
        numpy_helper.from_array(flip.astype(np_t), "flip"),
        numpy_helper.from_array(np.array(65504.0, np.float32).astype(np_t), "big"),
    ]
    return make_model(nodes, [("x", elem, [1, n])], [("y", elem, [1, n])], initializers=inits)


def mixed_fp16_max_model(n: int = 8) -> onnx.ModelProto:
    """fp32 I/O and MatMuls, Add/Sub in fp16 between explicit Casts (what a converter would emit)."""
    flip = np.rot90(np.eye(n)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "flip"], ["a"]),
        helper.make_node("Cast", ["a"], ["a16"], to=TensorProto.FLOAT16),
        helper.make_node("Add", ["a16", "big"], ["b"]),
        helper.make_node("Sub", ["b", "big"], ["c16"]),
        helper.make_node("Cast", ["c16"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["c", "flip"], ["y"]),
    ]
    inits = [numpy_helper.from_array(flip, "flip"), numpy_helper.from_array(np.array(65504.0, np.float16), "big")]
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, n])], [("y", TensorProto.FLOAT, [1, n])], initializers=inits)


def mlp_model(seed: int = 0, *, hidden: int = 16) -> onnx.ModelProto:
    """fp32 x[1,8] -> Gemm -> Relu -> Gemm -> y[1,4]: a small model for plugin and golden tests."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(size=(8, hidden)).astype(np.float32)
    w2 = rng.normal(size=(hidden, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "w2"], ["y"], name="fc2"),
    ]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    return make_model(
        nodes, [("x", TensorProto.FLOAT, [1, 8])], [("y", TensorProto.FLOAT, [1, 4])], initializers=inits, opset=13
    )


def cancellation_model() -> onnx.ModelProto:
    """fp32 y = (x + 256) - 256: activations stay under the converter's data_max=512, but fp16's ulp at 256 is
    0.25, so for x in [-0.5, 0.5] a truly rounded fp16 run returns multiples of 0.25 while ORT CPU's fp32
    island returns x to within fp32's ulp at 256 (3e-5)."""
    nodes = [
        helper.make_node("Add", ["x", "c"], ["a"], name="add"),
        helper.make_node("Sub", ["a", "c"], ["y"], name="sub"),
    ]
    return make_model(
        nodes,
        [("x", TensorProto.FLOAT, [1, 16])],
        [("y", TensorProto.FLOAT, [1, 16])],
        initializers=[numpy_helper.from_array(np.array(256.0, np.float32), "c")],
    )


def to_low(model: onnx.ModelProto, elem: int = TensorProto.FLOAT16) -> onnx.ModelProto:
    """Every fp32 initializer and graph I/O of ``model`` retyped to ``elem`` (a fully low-precision model)."""
    low = onnx.ModelProto()
    low.CopyFrom(model)
    np_t = helper.tensor_dtype_to_np_dtype(elem)
    for init in low.graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np_t), init.name))
    for value in [*low.graph.input, *low.graph.output]:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = elem
    onnx.checker.check_model(low, full_check=True)
    return low


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def bert_like_model(
    *, vocab: int = 30522, hidden: int = 16, max_positions: int = 512, seed: int = 0
) -> onnx.ModelProto:
    """A BERT-style encoder layer as exporters write it: ``input_ids``, ``attention_mask`` and ``token_type_ids``
    ([batch, sequence] int64, dynamic ``batch``/``sequence``); word (``vocab`` rows), position (the first
    ``sequence`` entries of a ``position_ids`` buffer, sliced as Hugging Face exports do) and token-type (2 rows)
    embeddings gathered and summed, LayerNormalization, one self-attention head with the additive mask
    (1 - mask) * -10000, and the hidden states out. (Positions from a Range node instead make onnxruntime 1.23's
    magnitude run fail to load the all-outputs model: "Failed to find node output ... positions".)"""
    rng = np.random.default_rng(seed)
    dims: list[int | str | None] = ["batch", "sequence"]

    def weight(name: str, *shape: int, scale: float = 0.02) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.normal(size=shape) * scale).astype(np.float32), name)

    def const(name: str, value: object, dtype: type = np.int64) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(value, dtype=dtype), name)

    inits = [
        weight("word_embeddings", vocab, hidden),
        weight("position_embeddings", max_positions, hidden),
        weight("token_type_embeddings", 2, hidden),
        weight("wq", hidden, hidden, scale=0.3),
        weight("wk", hidden, hidden, scale=0.3),
        weight("wv", hidden, hidden, scale=0.3),
        numpy_helper.from_array(np.ones(hidden, np.float32), "ln_scale"),
        numpy_helper.from_array(np.zeros(hidden, np.float32), "ln_bias"),
        const("position_ids", np.arange(max_positions)[None, :]),
        const("zero", [0]),
        const("one", [1]),
        const("mask_axes", [1]),
        const("f_one", 1.0, np.float32),
        const("f_neg", -10000.0, np.float32),
        const("f_scale", 1.0 / np.sqrt(hidden), np.float32),
    ]
    node = helper.make_node
    nodes = [
        node("Gather", ["word_embeddings", "input_ids"], ["words"], name="embeddings.word"),
        node("Gather", ["token_type_embeddings", "token_type_ids"], ["types"], name="embeddings.token_type"),
        node("Shape", ["input_ids"], ["seq_len"], name="seq_len", start=1, end=2),
        node("Slice", ["position_ids", "zero", "seq_len", "one"], ["positions"], name="positions"),
        node("Gather", ["position_embeddings", "positions"], ["pos"], name="embeddings.position"),
        node("Add", ["words", "types"], ["wt"], name="add_types"),
        node("Add", ["wt", "pos"], ["emb"], name="add_positions"),
        node("LayerNormalization", ["emb", "ln_scale", "ln_bias"], ["h"], name="ln", axis=-1),
        node("MatMul", ["h", "wq"], ["q"], name="q"),
        node("MatMul", ["h", "wk"], ["k"], name="k"),
        node("MatMul", ["h", "wv"], ["v"], name="v"),
        node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
        node("MatMul", ["q", "kt"], ["scores_raw"], name="scores"),
        node("Mul", ["scores_raw", "f_scale"], ["scores_scaled"], name="scale"),
        node("Unsqueeze", ["attention_mask", "mask_axes"], ["mask3"], name="mask_unsqueeze"),
        node("Cast", ["mask3"], ["maskf"], name="mask_cast", to=TensorProto.FLOAT),
        node("Sub", ["f_one", "maskf"], ["inverted"], name="mask_invert"),
        node("Mul", ["inverted", "f_neg"], ["additive"], name="mask_additive"),
        node("Add", ["scores_scaled", "additive"], ["masked"], name="mask_add"),
        node("Softmax", ["masked"], ["probs"], name="softmax", axis=-1),
        node("MatMul", ["probs", "v"], ["context"], name="context"),
        node("Add", ["context", "h"], ["last_hidden_state"], name="residual"),
    ]
    return make_model(
        nodes,
        [
            ("input_ids", TensorProto.INT64, dims),
            ("attention_mask", TensorProto.INT64, dims),
            ("token_type_ids", TensorProto.INT64, dims),
        ],
        [("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        initializers=inits,
        opset=17,
    )
