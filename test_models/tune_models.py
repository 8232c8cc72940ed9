"""Models built in code for ``castguard tune`` tests and ``benchmarks/bench_tune.py`` (not bundled files).

* :func:`residual_cancel`: every magnitude stays below 512, so the default conversion (data_max 512) puts it
  all in fp16, and fp16 rounding of a residual stream swallows the small update the output depends on
  (``(a + d) - a``): the default fails a 1e-3 bound; keeping the residual Add and the cancelling Sub FP32 fixes it.
* :func:`wide_activations`: a MLP whose hidden activations reach a few thousand (fine for fp16, beyond 512), so
  the default keeps most of its FLOPs FP32 although all-fp16 meets the bound.
* :func:`residual_stack`: ``depth`` pre-norm blocks on a residual stream (MatMul + Gelu-like + MatMul,
  LayerNormalization, a scaled residual Add); a transformer-like graph of adjustable size for the benchmark.
* :func:`conv_stack`: a ResNet-like CNN (Conv + BatchNormalization + Relu blocks with residual Adds, global
  pool, Gemm head); a CNN-like graph of adjustable size for the benchmark.

Weights come from fixed seeds, so each builder is deterministic.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(array.astype(np.float32)), name)


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    name: str,
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="castguard-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def residual_cancel(width: int = 32, seed: int = 0, *, second_cancel: bool = False) -> onnx.ModelProto:
    """x [1,width] -> a = x@Wa (|a| ~ 100-400), d = x@Wd (|d| ~ 0.05), r = a + d, c = r - a, y = c@Wy.
    ``second_cancel`` (a "new model version"): y = (c@Wy + 300) - 300, one more cancellation after the head."""
    rng = np.random.default_rng(seed)
    wa = rng.uniform(-1, 1, (width, width)) * (300.0 / np.sqrt(width))
    wd = rng.uniform(-1, 1, (width, width)) * (0.05 / np.sqrt(width))
    wy = rng.uniform(-1, 1, (width, 8)) / np.sqrt(width)
    nodes = [
        helper.make_node("MatMul", ["x", "Wa"], ["a"], name="proj_a"),
        helper.make_node("MatMul", ["x", "Wd"], ["d"], name="proj_d"),
        helper.make_node("Add", ["a", "d"], ["r"], name="residual_add"),
        helper.make_node("Sub", ["r", "a"], ["c"], name="cancel_sub"),
        helper.make_node("MatMul", ["c", "Wy"], ["y0" if second_cancel else "y"], name="head"),
    ]
    inits = [_init("Wa", wa), _init("Wd", wd), _init("Wy", wy)]
    if second_cancel:
        nodes += [
            helper.make_node("Add", ["y0", "shift"], ["y1"], name="shift_add"),
            helper.make_node("Sub", ["y1", "shift"], ["y"], name="unshift_sub"),
        ]
        inits.append(_init("shift", np.full((8,), 300.0)))
    return _model(
        nodes,
        inits,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        "residual_cancel",
    )


def wide_activations(width: int = 64, scale: float = 3000.0, seed: int = 1) -> onnx.ModelProto:
    """x [1,width] -> MatMul (|h| up to ~scale) -> Relu -> MatMul (scaled back) -> Relu -> MatMul -> y."""
    rng = np.random.default_rng(seed)
    w1 = rng.uniform(-1, 1, (width, width)) * (scale / np.sqrt(width))
    w2 = rng.uniform(-1, 1, (width, width)) / (scale * np.sqrt(width))
    w3 = rng.uniform(-1, 1, (width, 10)) / np.sqrt(width)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h1"], name="fc1"),
        helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
        helper.make_node("MatMul", ["a1", "W2"], ["h2"], name="fc2"),
        helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
        helper.make_node("MatMul", ["a2", "W3"], ["logits"], name="fc3"),
    ]
    return _model(
        nodes,
        [_init("W1", w1), _init("W2", w2), _init("W3", w3)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        "wide_activations",
    )


def residual_stack(
    depth: int = 4, width: int = 64, tokens: int = 16, stream_scale: float = 200.0, seed: int = 2
) -> onnx.ModelProto:
    """Transformer-like: x [1,tokens,width] * stream_scale -> depth x (LN -> MatMul -> Tanh-Gelu -> MatMul ->
    residual Add) -> LN -> MatMul head. The stream grows to a few hundred, the updates stay ~1."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Mul", ["x", "stream_scale"], ["s0"], name="embed_scale")]
    inits = [
        _init("stream_scale", np.array(stream_scale)),
        _init("ln_g", np.ones(width)),
        _init("ln_b", np.zeros(width)),
        _init("half", np.array(0.5)),
        _init("one", np.array(1.0)),
        _init("c0", np.array(0.7978845608)),
        _init("c1", np.array(0.044715)),
        _init("three", np.array(3.0)),
    ]
    stream = "s0"
    for i in range(depth):
        p = f"b{i}_"
        inits += [
            _init(p + "W1", rng.normal(0, 1 / np.sqrt(width), (width, 4 * width))),
            _init(p + "W2", rng.normal(0, 0.5 / np.sqrt(4 * width), (4 * width, width))),
        ]
        nodes += [
            helper.make_node("LayerNormalization", [stream, "ln_g", "ln_b"], [p + "n"], name=p + "ln", axis=-1),
            helper.make_node("MatMul", [p + "n", p + "W1"], [p + "h"], name=p + "fc1"),
            helper.make_node("Pow", [p + "h", "three"], [p + "h3"], name=p + "cube"),
            helper.make_node("Mul", [p + "h3", "c1"], [p + "h3s"], name=p + "cube_scale"),
            helper.make_node("Add", [p + "h", p + "h3s"], [p + "inner"], name=p + "inner_add"),
            helper.make_node("Mul", [p + "inner", "c0"], [p + "inner_s"], name=p + "inner_scale"),
            helper.make_node("Tanh", [p + "inner_s"], [p + "t"], name=p + "tanh"),
            helper.make_node("Add", [p + "t", "one"], [p + "t1"], name=p + "tanh_add"),
            helper.make_node("Mul", [p + "h", p + "t1"], [p + "g0"], name=p + "gelu_mul"),
            helper.make_node("Mul", [p + "g0", "half"], [p + "g"], name=p + "gelu_half"),
            helper.make_node("MatMul", [p + "g", p + "W2"], [p + "u"], name=p + "fc2"),
            helper.make_node("Add", [stream, p + "u"], [p + "s"], name=p + "residual"),
        ]
        stream = p + "s"
    inits.append(_init("head_W", rng.normal(0, 1 / np.sqrt(width), (width, 16))))
    nodes += [
        helper.make_node("Sub", [stream, "s0"], ["delta"], name="stream_delta"),
        helper.make_node("LayerNormalization", ["delta", "ln_g", "ln_b"], ["final_n"], name="final_ln", axis=-1),
        helper.make_node("MatMul", ["final_n", "head_W"], ["y"], name="head"),
    ]
    return _model(
        nodes,
        inits,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, 16])],
        "residual_stack",
    )


def conv_stack(blocks: int = 3, channels: int = 16, size: int = 16, seed: int = 3) -> onnx.ModelProto:
    """CNN-like: stem Conv -> blocks x (Conv-BN-Relu-Conv-BN + residual Add -> Relu) -> GlobalAveragePool ->
    Flatten -> Gemm logits [1,10]. BatchNorm variances are small, so pre-norm activations reach the thousands."""
    rng = np.random.default_rng(seed)
    inits = [_init("stem_W", rng.normal(0, 0.5, (channels, 3, 3, 3))), _init("stem_B", np.zeros(channels))]
    nodes = [helper.make_node("Conv", ["x", "stem_W", "stem_B"], ["f0"], name="stem", pads=[1, 1, 1, 1])]
    feat = "f0"
    for i in range(blocks):
        p = f"blk{i}_"
        for j in (1, 2):
            inits += [
                _init(f"{p}W{j}", rng.normal(0, 200.0 / np.sqrt(9 * channels), (channels, channels, 3, 3))),
                _init(f"{p}g{j}", rng.uniform(0.5, 1.5, channels)),
                _init(f"{p}b{j}", rng.normal(0, 0.1, channels)),
                _init(f"{p}m{j}", rng.normal(0, 1.0, channels)),
                _init(f"{p}v{j}", rng.uniform(20000, 80000, channels)),
            ]
        nodes += [
            helper.make_node("Conv", [feat, p + "W1"], [p + "c1"], name=p + "conv1", pads=[1, 1, 1, 1]),
            helper.make_node(
                "BatchNormalization", [p + "c1", p + "g1", p + "b1", p + "m1", p + "v1"], [p + "n1"], name=p + "bn1"
            ),
            helper.make_node("Relu", [p + "n1"], [p + "r1"], name=p + "relu1"),
            helper.make_node("Conv", [p + "r1", p + "W2"], [p + "c2"], name=p + "conv2", pads=[1, 1, 1, 1]),
            helper.make_node(
                "BatchNormalization", [p + "c2", p + "g2", p + "b2", p + "m2", p + "v2"], [p + "n2"], name=p + "bn2"
            ),
            helper.make_node("Add", [feat, p + "n2"], [p + "sum"], name=p + "residual"),
            helper.make_node("Relu", [p + "sum"], [p + "out"], name=p + "relu_out"),
        ]
        feat = p + "out"
    inits += [_init("fc_W", rng.normal(0, 1 / np.sqrt(channels), (10, channels))), _init("fc_B", np.zeros(10))]
    nodes += [
        helper.make_node("GlobalAveragePool", [feat], ["pooled"], name="gap"),
        helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_W", "fc_B"], ["logits"], name="fc", transB=1),
    ]
    return _model(
        nodes,
        inits,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        "conv_stack",
    )
