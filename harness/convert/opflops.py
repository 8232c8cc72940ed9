"""FLOPs of the ops whose work is not their output size: recurrent cells, Einsum and attention contrib ops.

Hand counts (one multiply-add = 2 FLOPs):

* LSTM: per time step, batch row and direction ``2*4H*(I+H)`` (gates from X and H) plus ``2*4H`` with a bias
  (``B`` holds Wb and Rb); GRU the same with 3 gates, RNN with 1.
* Einsum: the iteration space of its equation (the product of every letter's size) times the multiplies per
  point (operands - 1, at least 1) plus one add when a letter is summed away over two or more operands: 2*M*N*K
  for a matrix product, as numpy's ``einsum_path`` counts a naive contraction.
* com.microsoft Attention: the QKV projection ``2*B*S*In*(Q+K+V)``, then ``2*B*heads*S*T*(dq+dv)`` for the
  scores and the weighted sum, plus ``B*heads*S*T`` for the softmax (T: past + current keys).
* com.microsoft MultiHeadAttention / GroupQueryAttention and ONNX Attention (opset 23): the same without the
  projection (their inputs are already projected).

Every function returns None when a shape it needs is unknown (the caller then names the node).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable

import onnx

ShapeOf = Callable[[str], tuple[int | None, ...] | None]
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
RECURRENT = tuple(_GATES)
ATTENTION = ("Attention", "MultiHeadAttention", "GroupQueryAttention")


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _known(shape: tuple[int | None, ...] | None) -> tuple[int, ...] | None:
    if shape is None or any(d is None for d in shape):
        return None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def _input(node: onnx.NodeProto, index: int, shape_of: ShapeOf) -> tuple[int, ...] | None:
    if len(node.input) <= index or not node.input[index]:
        return None
    return _known(shape_of(node.input[index]))


def recurrent_flops(node: onnx.NodeProto, shape_of: ShapeOf) -> int | None:
    """LSTM/GRU/RNN: ``steps * batch * directions * (2*G*H*(I+H) + 2*G*H with a bias)``."""
    x, w = _input(node, 0, shape_of), _input(node, 1, shape_of)
    if x is None or w is None or len(x) != 3 or len(w) != 3:
        return None
    steps, batch = (x[1], x[0]) if _attr(node, "layout", 0) else (x[0], x[1])
    gates = _GATES[node.op_type]
    directions, hidden, features = w[0], w[1] // gates, w[2]
    bias = 2 * gates * hidden if len(node.input) > 3 and node.input[3] else 0
    return steps * batch * directions * (2 * gates * hidden * (features + hidden) + bias)


def _letters(term: str, rank: int, free: str) -> str | None:
    """A term's letters with its ``...`` spelled out (right-aligned, as broadcasting does), or None."""
    if "..." not in term:
        return term if len(term) == rank else None
    head, _, tail = term.partition("...")
    count = rank - len(head) - len(tail)
    return None if count < 0 else head + free[len(free) - count :] + tail


def einsum_flops(node: onnx.NodeProto, shape_of: ShapeOf) -> int | None:
    """Einsum: its equation's iteration space times the multiplies and the add per point."""
    equation = next((a.s.decode() for a in node.attribute if a.name == "equation"), "").replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    shapes = [_known(shape_of(name)) if name else None for name in node.input]
    terms = lhs.split(",")
    if not equation or len(terms) != len(shapes) or any(s is None for s in shapes):
        return None
    used = set(equation)
    free = "".join(c for c in string.ascii_letters if c not in used)
    sizes: dict[str, int] = {}
    letters_in: list[str] = []
    for term, shape in zip(terms, shapes):
        letters = _letters(term, len(shape), free)  # type: ignore[arg-type]
        if letters is None:
            return None
        letters_in.append(letters)
        for letter, size in zip(letters, shape):  # type: ignore[arg-type]
            sizes[letter] = max(sizes.get(letter, 1), size)
    spread = {c for letters in letters_in for c in letters if c in free}
    if arrow:
        out = set(rhs.replace("...", "")) | (spread if "..." in rhs else set())
    else:
        counts = {c: sum(letters.count(c) for letters in letters_in) for c in sizes}
        out = {c for c, n in counts.items() if n == 1} | spread
    space = math.prod(sizes.values())
    summed = len(shapes) > 1 and any(c not in out for c in sizes)
    return space * (max(len(shapes) - 1, 1) + (1 if summed else 0))


def attention_flops(node: onnx.NodeProto, shape_of: ShapeOf) -> int | None:
    """com.microsoft Attention, MultiHeadAttention and GroupQueryAttention; see the module docstring."""
    query = _input(node, 0, shape_of)
    heads = _attr(node, "num_heads", 0)
    if query is None or len(query) != 3 or heads <= 0:
        return None
    batch, steps, width = query
    projection = 0
    if node.op_type == "Attention":
        weights = _input(node, 1, shape_of)
        if weights is None or len(weights) != 2:
            return None
        projection = 2 * batch * steps * weights[0] * weights[1]
        qk = v = weights[1] // 3
        sizes = [int(s) for a in node.attribute if a.name == "qkv_hidden_sizes" for s in a.ints]
        if len(sizes) == 3:
            qk, v = sizes[0], sizes[2]
        past = _input(node, 4, shape_of)
        keys = steps + (past[3] if past is not None and len(past) == 5 else 0)
    else:
        qk, v, attended = _keys(node, width, heads, steps, shape_of)
        if attended is None:
            return None
        keys = attended
    per_head = (qk + v) // heads
    return projection + 2 * batch * heads * steps * keys * per_head + batch * heads * steps * keys


def onnx_attention_flops(node: onnx.NodeProto, shape_of: ShapeOf) -> int | None:
    """ONNX Attention (opset 23): ``2*B*Hq*S*T*(D+Dv) + B*Hq*S*T``, with Q/K/V 4-D or 3-D (heads from attributes)
    and T the past plus the current keys."""
    q, k, v = (_input(node, i, shape_of) for i in range(3))
    if q is None or k is None or v is None:
        return None
    q_heads, kv_heads = _attr(node, "q_num_heads", 0), _attr(node, "kv_num_heads", 0)
    if len(q) == 4:
        batch, q_heads, steps, head = q
    elif len(q) == 3 and q_heads > 0:
        batch, steps, head = q[0], q[1], q[2] // q_heads
    else:
        return None
    keys = k[2] if len(k) == 4 else k[1]
    if len(v) == 4:
        v_head = v[3]
    elif kv_heads > 0:
        v_head = v[2] // kv_heads
    else:
        return None
    past = _input(node, 4, shape_of)
    keys += past[2] if past is not None and len(past) == 4 else 0
    return 2 * batch * q_heads * steps * keys * (head + v_head) + batch * q_heads * steps * keys


def _keys(node: onnx.NodeProto, width: int, heads: int, steps: int, shape_of: ShapeOf) -> tuple[int, int, int | None]:
    """(query width, value width, attended keys) of MultiHeadAttention/GroupQueryAttention."""
    key = _input(node, 1, shape_of)
    if node.op_type == "GroupQueryAttention":
        kv_heads = _attr(node, "kv_num_heads", heads)
        if key is None:  # packed QKV: width = (heads + 2*kv_heads) * head size
            head = width // (heads + 2 * kv_heads)
            width = heads * head
        past = _input(node, 3, shape_of)
        keys = steps + (past[2] if past is not None and len(past) == 4 else 0)
        return width, width, keys
    if key is None:
        return width, width, None
    value = _input(node, 2, shape_of)
    past = _input(node, 6, shape_of)
    keys = key[2] if len(key) == 4 else key[1]
    keys += past[2] if past is not None and len(past) == 4 and len(key) == 3 else 0
    v_width = width if value is None else (value[1] * value[3] if len(value) == 4 else value[2])
    return width, v_width, keys
