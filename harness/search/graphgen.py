"""Random *valid* ONNX graphs, built one node at a time from Hypothesis draws (used by
:func:`harness.search.strategies.onnx_models`).

The builder keeps a pool of float32 tensors with known static shapes. Each step draws an op type that
applies to some pool tensor, draws its operands (pool tensors or new constants) and attributes, computes
the output shape from the op's rule, and adds the output to the pool (the pool and the nodes are
:class:`~harness.search.graphbuild.Build`'s). Constants get a random magnitude from
:data:`~harness.search.graphbuild.MAGNITUDES` (some past fp16's 65504, some below 1e-7), stored as initializers or
Constant nodes. Every draw goes through Hypothesis, so a failing graph shrinks toward fewer, simpler nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness.search.graphbuild import Build, Shape, Tensor

OPS = (
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Sqrt",
    "Exp",
    "MatMul",
    "Gemm",
    "Conv",
    "Softmax",
    "LayerNormalization",
    "ReduceMean",
    "ReduceSum",
    "Concat",
    "Reshape",
    "Transpose",
    "Split",
)
ANY_TENSOR_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Relu", "Sigmoid", "Tanh", "Sqrt", "Exp", "Reshape"})
"""Ops that apply to every tensor; a graph needs at least one of them so that it can always grow."""
EXPONENTS = (2.0, 1.0, 0.5, 3.0, -1.0)


def _broadcast_partner(b: Build, shape: Shape) -> Shape:
    """A shape that broadcasts to ``shape``: a suffix of it with some dims set to 1 (maybe a scalar)."""
    rank = b.draw(st.integers(0, len(shape)))
    suffix = shape[len(shape) - rank :]
    return tuple(1 if b.draw(st.booleans()) else d for d in suffix)


def _operand(b: Build, shape: Shape) -> tuple[str, Shape]:
    """A second operand for an elementwise op on ``shape``: a broadcast-compatible pool tensor or a constant."""

    def compatible(t: Tensor) -> bool:
        try:
            return b.fits_size(np.broadcast_shapes(shape, t.shape))
        except ValueError:
            return False

    if b.draw(st.booleans(), label="tensor operand") and any(compatible(t) for t in b.pool):
        other = b.pick(compatible)
        return other.name, other.shape
    partner = _broadcast_partner(b, shape)
    return b.constant(partner), partner


def _elementwise(op: str) -> Callable[[Build, Tensor], Tensor]:
    def build(b: Build, x: Tensor) -> Tensor:
        if op == "Pow" and b.draw(st.booleans(), label="constant exponent"):
            exponent = b.draw(st.sampled_from(EXPONENTS))
            return b.node(op, [x.name, b.constant((), values=np.array(exponent))], x.shape)
        name, other = _operand(b, x.shape)
        inputs = [name, x.name] if b.draw(st.booleans(), label="swap operands") else [x.name, name]
        return b.node(op, inputs, tuple(np.broadcast_shapes(x.shape, other)))

    return build


def _unary(op: str) -> Callable[[Build, Tensor], Tensor]:
    return lambda b, x: b.node(op, [x.name], x.shape)


def _matmul(b: Build, x: Tensor) -> Tensor:
    k = x.shape[-1]
    if len(x.shape) >= 2 and b.draw(st.booleans(), label="weight on the left"):
        m = b.new_dim((*x.shape[:-2], k))
        return b.node("MatMul", [b.constant((m, x.shape[-2])), x.name], (*x.shape[:-2], m, k))
    square = [t for t in b.pool if len(t.shape) == 2 and t.shape[0] == k]
    if len(square) > 0 and b.draw(st.booleans(), label="tensor weight"):
        w = b.draw(st.sampled_from(square))
        return b.node("MatMul", [x.name, w.name], (*x.shape[:-1], w.shape[1]))
    n = b.new_dim(x.shape[:-1])
    return b.node("MatMul", [x.name, b.constant((k, n))], (*x.shape[:-1], n))


def _gemm(b: Build, x: Tensor) -> Tensor:
    trans_a, trans_b = b.draw(st.booleans()), b.draw(st.booleans())
    m, k = (x.shape[1], x.shape[0]) if trans_a else x.shape
    n = b.new_dim((m,))
    inputs = [x.name, b.constant((n, k) if trans_b else (k, n))]
    bias = b.draw(st.sampled_from(("none", "vector", "row", "full", "scalar")))
    if bias != "none":
        inputs.append(b.constant({"vector": (n,), "row": (1, n), "full": (m, n), "scalar": ()}[bias]))
    alpha, beta = b.draw(st.sampled_from((1.0, 0.5, 2.0))), b.draw(st.sampled_from((1.0, 0.5, 2.0)))
    return b.node("Gemm", inputs, (m, n), transA=int(trans_a), transB=int(trans_b), alpha=alpha, beta=beta)


def _conv(b: Build, x: Tensor) -> Tensor:
    batch, channels, *spatial = x.shape
    group = channels if channels > 1 and b.draw(st.booleans(), label="depthwise") else 1
    pad, stride = b.draw(st.integers(0, 1)), b.draw(st.integers(1, 2))
    kernel = [b.draw(st.integers(1 + pad if size > 1 else 1, min(3, size + 2 * pad))) for size in spatial]
    out = [(size + 2 * pad - k) // stride + 1 for size, k in zip(spatial, kernel)]
    out_channels = group * b.new_dim((batch, group, *out))
    inputs = [x.name, b.constant((out_channels, channels // group, *kernel))]
    if b.draw(st.booleans(), label="conv bias"):
        inputs.append(b.constant((out_channels,)))
    return b.node(
        "Conv",
        inputs,
        (batch, out_channels, *out),
        group=group,
        kernel_shape=kernel,
        pads=[pad] * (2 * len(spatial)),
        strides=[stride] * len(spatial),
    )


def _axis(b: Build, rank: int) -> int:
    return b.draw(st.integers(-rank, rank - 1))


def _softmax(b: Build, x: Tensor) -> Tensor:
    return b.node("Softmax", [x.name], x.shape, axis=_axis(b, len(x.shape)))


def _normalizable_axes(shape: tuple[int, ...]) -> list[int]:
    """Axes whose trailing block holds more than one element: onnxruntime before 1.24 refuses a LayerNormalization
    over one element ("Size of X.shape[axis:] must be larger than 1"), and it would only return its bias."""
    return [axis for axis in range(len(shape)) if math.prod(shape[axis:]) > 1]


def _layer_norm(b: Build, x: Tensor) -> Tensor:
    rank = len(x.shape)
    axis = b.draw(st.sampled_from(_normalizable_axes(x.shape)), label="layernorm axis")
    axis = axis - rank if b.draw(st.booleans(), label="negative axis") else axis
    normalized = x.shape[axis:]
    inputs = [x.name, b.constant(normalized)]
    if b.draw(st.booleans(), label="layernorm bias"):
        inputs.append(b.constant(normalized))
    epsilon = b.draw(st.sampled_from((1e-5, 1e-12, 1e-3)))
    stats = b.draw(st.sampled_from(("none", "mean", "both", "inv_only")), label="layernorm stats outputs")
    if stats == "none":
        return b.node("LayerNormalization", inputs, x.shape, axis=axis, epsilon=epsilon)
    reduced = tuple(d if i < axis % len(x.shape) else 1 for i, d in enumerate(x.shape))
    shapes: dict[str, list[Shape | None]] = {
        "mean": [x.shape, reduced],
        "both": [x.shape, reduced, reduced],
        "inv_only": [x.shape, None, reduced],
    }
    return b.multi("LayerNormalization", inputs, shapes[stats], axis=axis, epsilon=epsilon)[0]


def _split(b: Build, x: Tensor) -> Tensor:
    """Split along an axis of size >= 2 into 2 or 3 parts: ``num_outputs`` (opset 18+, equal parts) or a
    ``split`` input of sizes."""
    axes = [i for i, d in enumerate(x.shape) if d >= 2]
    pos = b.draw(st.sampled_from(axes), label="split axis")
    size = x.shape[pos]
    parts = b.draw(st.integers(2, min(3, size)), label="split parts")
    if b.opset >= 18 and size % parts == 0 and b.draw(st.booleans(), label="num_outputs"):
        sizes, extra, attrs = [size // parts] * parts, [], {"num_outputs": parts}
    else:
        cuts = sorted(b.draw(st.sets(st.integers(1, size - 1), min_size=parts - 1, max_size=parts - 1)))
        sizes = [e - s for s, e in zip([0, *cuts], [*cuts, size])]
        extra, attrs = [b.ints(sizes)], {}
    shapes = [tuple(n if i == pos else d for i, d in enumerate(x.shape)) for n in sizes]
    axis = pos - len(x.shape) if b.draw(st.booleans(), label="negative axis") else pos
    return b.multi("Split", [x.name, *extra], shapes, axis=axis, **attrs)[0]


def _reduce(op: str) -> Callable[[Build, Tensor], Tensor]:
    def build(b: Build, x: Tensor) -> Tensor:
        rank = len(x.shape)
        axes = sorted(b.draw(st.sets(st.integers(0, rank - 1), max_size=rank), label="reduce axes"))
        keep = b.draw(st.booleans(), label="keepdims")
        reduced = set(axes or range(rank))
        shape = tuple(1 if i in reduced else d for i, d in enumerate(x.shape) if keep or i not in reduced)
        signed = [a - rank if b.draw(st.booleans()) else a for a in axes]
        if op == "ReduceSum" or b.opset >= 18:
            inputs = [x.name, b.ints(signed)] if signed else [x.name]
            return b.node(op, inputs, shape, keepdims=int(keep))
        attrs: dict[str, Any] = {"axes": signed} if signed else {}
        return b.node(op, [x.name], shape, keepdims=int(keep), **attrs)

    return build


def _concat(b: Build, x: Tensor) -> Tensor:
    axis = _axis(b, len(x.shape))
    pos = axis % len(x.shape)

    def along(shape: Shape, size: int) -> Shape:
        return tuple(size if i == pos else d for i, d in enumerate(shape))

    def fits(t: Tensor) -> bool:
        return along(t.shape, 0) == along(x.shape, 0) and b.fits_size(along(x.shape, x.shape[pos] + t.shape[pos]))

    parts = [x]
    if b.draw(st.booleans(), label="concat constant"):
        size = b.draw(st.integers(1, b.max_dim))
        if b.fits_size(along(x.shape, x.shape[pos] + size)):
            parts.append(Tensor(b.constant(along(x.shape, size)), along(x.shape, size)))
    elif any(fits(t) for t in b.pool):
        parts.append(b.pick(fits))
    if len(parts) == 1:
        parts = [x, x]
    shape = along(x.shape, sum(t.shape[pos] for t in parts))
    return b.node("Concat", [t.name for t in parts], shape, axis=axis)


def _reshape(b: Build, x: Tensor) -> Tensor:
    size = math.prod(x.shape)
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    kind = b.draw(st.sampled_from(("flat", "split", "unsqueeze", "reverse")))
    target: Shape = {"flat": (size,), "unsqueeze": (1, *x.shape), "reverse": tuple(reversed(x.shape))}.get(kind, ())
    if kind == "split":
        first = b.draw(st.sampled_from(divisors))
        target = (first, size // first)
    spec = list(target)
    if len(spec) > 0 and b.draw(st.booleans(), label="reshape -1"):
        spec[b.draw(st.integers(0, len(spec) - 1))] = -1
    return b.node("Reshape", [x.name, b.ints(spec)], target)


def _transpose(b: Build, x: Tensor) -> Tensor:
    perm = b.draw(st.permutations(range(len(x.shape))))
    return b.node("Transpose", [x.name], tuple(x.shape[p] for p in perm), perm=list(perm))


Rule = tuple[Callable[[Build, Tensor], bool], Callable[[Build, Tensor], Tensor]]


def _rank(low: int, high: int = 8) -> Callable[[Build, Tensor], bool]:
    return lambda b, t: low <= len(t.shape) <= high


RULES: Mapping[str, Rule] = MappingProxyType(
    {
        **{op: (_rank(0), _elementwise(op)) for op in ("Add", "Sub", "Mul", "Div", "Pow")},
        **{op: (_rank(0), _unary(op)) for op in ("Relu", "Sigmoid", "Tanh", "Sqrt", "Exp")},
        "MatMul": (_rank(1), _matmul),
        "Gemm": (_rank(2, 2), _gemm),
        "Conv": (_rank(3, 4), _conv),
        "Softmax": (_rank(1), _softmax),
        "LayerNormalization": (lambda b, t: bool(t.shape) and bool(_normalizable_axes(t.shape)), _layer_norm),
        "ReduceMean": (_rank(1), _reduce("ReduceMean")),
        "ReduceSum": (_rank(1), _reduce("ReduceSum")),
        "Concat": (lambda b, t: len(t.shape) >= 1 and b.fits_size((2, *t.shape)), _concat),
        "Reshape": (_rank(0), _reshape),
        "Transpose": (_rank(2), _transpose),
        "Split": (lambda b, t: any(d >= 2 for d in t.shape), _split),
    }
)
MIN_OPSET = MappingProxyType({"LayerNormalization": 17})


def grow(b: Build, ops: Sequence[str]) -> Tensor:
    """Add one node: an op that applies to some pool tensor, on a tensor it applies to."""
    usable = [op for op in ops if b.opset >= MIN_OPSET.get(op, 1) and any(RULES[op][0](b, t) for t in b.pool)]
    op = b.draw(st.sampled_from(usable), label="op")
    applies, build = RULES[op]
    return build(b, b.pick(lambda t: applies(b, t)))
