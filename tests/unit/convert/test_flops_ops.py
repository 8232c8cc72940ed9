"""FLOPs of ops whose work is not their output size, each against a hand count (issue 32 item 3): LSTM, GRU and
RNN (2*G*H*(I+H) per step, batch row and direction, + 2*G*H with a bias), Einsum from its equation, the
com.microsoft attention ops, and the Conv variants (grouped, dilated, ConvTranspose)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from harness.convert import ConvertOptions, convert
from harness.convert.flops import node_flops
from harness.convert.flopshapes import flop_shapes
from tests.helpers.convert_builders import F32, init, model, node, vi

MS = ("com.microsoft", 1)


def _flops(graph: onnx.ModelProto, name: str, shapes: dict[str, tuple[int, ...]] | None = None) -> int | None:
    known = flop_shapes(graph, shapes=shapes or {})
    target = next(n for n in graph.graph.node if n.name == name)
    inits = {i.name: i for i in graph.graph.initializer}

    def shape_of(tensor: str) -> tuple[int, ...] | None:
        dims = known.dims(tensor)
        return None if dims is None or None in dims else tuple(int(d) for d in dims)  # type: ignore[arg-type]

    return node_flops(target, shape_of, inits)


def _recurrent(
    op: str, gates: int, *, steps: int, batch: int, features: int, hidden: int, dirs: int
) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weights = [
        init("W", rng.standard_normal((dirs, gates * hidden, features)).astype(np.float32) * 0.1),
        init("R", rng.standard_normal((dirs, gates * hidden, hidden)).astype(np.float32) * 0.1),
        init("B", np.zeros((dirs, 2 * gates * hidden), np.float32)),
    ]
    direction = "bidirectional" if dirs == 2 else "forward"
    return model(
        [
            node(op, ["x", "W", "R", "B"], ["seq"], "cell", hidden_size=hidden, direction=direction),
            node("Relu", ["seq"], ["y"], "relu"),
        ],
        [vi("x", F32, [steps, batch, features])],
        [vi("y", F32, [steps, dirs, batch, hidden])],
        weights,
    )


@pytest.mark.parametrize(("op", "gates"), [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
def test_recurrent_ops_count_their_gate_arithmetic(op: str, gates: int) -> None:
    steps, batch, features, hidden, dirs = 7, 3, 20, 24, 2
    graph = _recurrent(op, gates, steps=steps, batch=batch, features=features, hidden=hidden, dirs=dirs)
    per_step = 2 * gates * hidden * (features + hidden) + 2 * gates * hidden
    assert _flops(graph, "cell") == steps * batch * dirs * per_step


def test_a_tagger_with_its_lstm_excluded_is_mostly_fp32() -> None:
    """The issue's tagger: an LSTM excluded must leave a small share, not the share of its output size."""
    steps, batch, features, hidden = 16, 2, 64, 64
    graph = _recurrent("LSTM", 4, steps=steps, batch=batch, features=features, hidden=hidden, dirs=1)
    result = convert(graph, options=ConvertOptions(op_types_to_exclude=("LSTM",)), magnitudes=None)
    lstm = steps * batch * (2 * 4 * hidden * (features + hidden) + 2 * 4 * hidden)
    relu = steps * batch * hidden
    assert result.lowp_flop_share == pytest.approx(relu / (relu + lstm))
    assert result.lowp_flop_share < 0.01


@pytest.mark.parametrize(
    ("equation", "shapes", "expected"),
    [
        ("bij,bjk->bik", [(2, 3, 5), (2, 5, 7)], 2 * 2 * 3 * 5 * 7),  # batched matmul: 2*B*M*K*N
        ("...ij,...jk->...ik", [(4, 2, 3, 5), (4, 2, 5, 7)], 2 * 4 * 2 * 3 * 5 * 7),
        ("ij,jk", [(3, 5), (5, 7)], 2 * 3 * 5 * 7),  # implicit output "ik": j summed
        ("bi,bj->bij", [(2, 3), (2, 5)], 2 * 3 * 5),  # outer product: one multiply per point
        ("ii->i", [(6, 6)], 6),  # a diagonal: one operand, nothing summed
        ("bhqd,bhkd->bhqk", [(1, 4, 8, 16), (1, 4, 8, 16)], 2 * 4 * 8 * 8 * 16),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], 3 * 2 * 3 * 4 * 5),  # two multiplies and an add per point
    ],
)
def test_einsum_counts_its_equation(equation: str, shapes: list[tuple[int, ...]], expected: int) -> None:
    names = [f"in{i}" for i in range(len(shapes))]
    graph = model(
        [node("Einsum", names, ["y"], "ein", equation=equation)],
        [vi(n, F32, list(s)) for n, s in zip(names, shapes)],
        [vi("y", F32, None)],
        opset=17,
    )
    assert _flops(graph, "ein") == expected


def test_contrib_attention_counts_projection_scores_and_weighted_sum() -> None:
    batch, steps, width, heads = 2, 10, 32, 4
    graph = model(
        [node("Attention", ["x", "w", "b"], ["y"], "attn", domain="com.microsoft", num_heads=heads)],
        [vi("x", F32, [batch, steps, width])],
        [vi("y", F32, [batch, steps, width])],
        [init("w", np.zeros((width, 3 * width), np.float32)), init("b", np.zeros(3 * width, np.float32))],
        extra_opsets=[MS],
    )
    head = width // heads
    projection = 2 * batch * steps * width * 3 * width
    scores_and_sum = 2 * batch * heads * steps * steps * (2 * head)
    softmax = batch * heads * steps * steps
    assert _flops(graph, "attn") == projection + scores_and_sum + softmax


def test_multi_head_and_group_query_attention_count_their_keys() -> None:
    batch, steps, keys, width, heads, kv_heads = 1, 6, 9, 16, 4, 2
    mha = model(
        [node("MultiHeadAttention", ["q", "k", "v"], ["y"], "mha", domain="com.microsoft", num_heads=heads)],
        [vi("q", F32, [batch, steps, width]), vi("k", F32, [batch, keys, width]), vi("v", F32, [batch, keys, width])],
        [vi("y", F32, [batch, steps, width])],
        extra_opsets=[MS],
    )
    head = width // heads
    assert _flops(mha, "mha") == 2 * batch * heads * steps * keys * 2 * head + batch * heads * steps * keys
    kv = kv_heads * head
    past = 5
    gqa = model(
        [
            node(
                "GroupQueryAttention",
                ["q", "k", "v", "pk", "pv", "lens", "total"],
                ["y", "pko", "pvo"],
                "gqa",
                domain="com.microsoft",
                num_heads=heads,
                kv_num_heads=kv_heads,
            )
        ],
        [
            vi("q", F32, [batch, steps, width]),
            vi("k", F32, [batch, steps, kv]),
            vi("v", F32, [batch, steps, kv]),
            vi("pk", F32, [batch, kv_heads, past, head]),
            vi("pv", F32, [batch, kv_heads, past, head]),
            vi("lens", onnx.TensorProto.INT32, [batch]),
            vi("total", onnx.TensorProto.INT32, []),
        ],
        [vi("y", F32, [batch, steps, width])],
        extra_opsets=[MS],
    )
    total = steps + past
    assert _flops(gqa, "gqa") == 2 * batch * heads * steps * total * 2 * head + batch * heads * steps * total


@pytest.mark.parametrize(
    ("op", "attrs", "weight", "expected"),
    [
        # grouped: out 1x8x6x6, 4 in-channels per group of 2, 3x3 kernel
        ("Conv", {"group": 2}, (8, 4, 3, 3), 2 * (8 * 6 * 6) * (4 * 3 * 3)),
        # dilated: 3x3 kernel spread over 5x5, out 1x8x4x4, all 8 in-channels
        ("Conv", {"dilations": [2, 2]}, (8, 8, 3, 3), 2 * (8 * 4 * 4) * (8 * 3 * 3)),
        # ConvTranspose: every input element times out-channels/group times the kernel
        ("ConvTranspose", {"strides": [2, 2]}, (8, 6, 3, 3), 2 * (8 * 8 * 8) * (6 * 3 * 3)),
        ("ConvTranspose", {"group": 2}, (8, 3, 3, 3), 2 * (8 * 8 * 8) * (3 * 3 * 3)),
    ],
)
def test_conv_variants_count_real_arithmetic(
    op: str, attrs: dict[str, object], weight: tuple[int, ...], expected: int
) -> None:
    graph = model(
        [node(op, ["x", "W"], ["y"], "conv", **attrs)],
        [vi("x", F32, [1, 8, 8, 8])],
        [vi("y", F32, None)],
        [init("W", np.zeros(weight, np.float32))],
    )
    assert _flops(graph, "conv") == expected


@pytest.mark.parametrize("packed", [False, True])
def test_onnx_attention_counts_scores_and_weighted_sum(packed: bool) -> None:
    """ONNX Attention (opset 23), 4-D heads or 3-D with q_num_heads/kv_num_heads, grouped KV heads."""
    batch, heads, kv_heads, steps, keys, head = 2, 4, 2, 5, 7, 8
    if packed:
        shapes = [[batch, steps, heads * head], [batch, keys, kv_heads * head], [batch, keys, kv_heads * head]]
        attrs: dict[str, object] = {"q_num_heads": heads, "kv_num_heads": kv_heads}
    else:
        shapes = [[batch, heads, steps, head], [batch, kv_heads, keys, head], [batch, kv_heads, keys, head]]
        attrs = {}
    graph = model(
        [node("Attention", ["q", "k", "v"], ["y"], "attn", **attrs)],
        [vi(n, F32, s) for n, s in zip("qkv", shapes)],
        [vi("y", F32, None)],
        opset=23,
        ir=10,
    )
    expected = 2 * batch * heads * steps * keys * (2 * head) + batch * heads * steps * keys
    assert _flops(graph, "attn") == expected


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("bij,bjk->bik", [(2, 3, 5), (2, 5, 7)]),
        ("bhqd,bhkd->bhqk", [(1, 4, 8, 16), (1, 4, 8, 16)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
        ("bsh,hd->bsd", [(2, 6, 8), (8, 4)]),
    ],
)
def test_einsum_contractions_agree_with_numpys_naive_count(equation: str, shapes: list[tuple[int, ...]]) -> None:
    """An independent count: numpy's einsum_path reports the naive FLOP count of the same contraction."""
    arrays = [np.ones(s, np.float32) for s in shapes]
    report = np.einsum_path(equation, *arrays, optimize=False)[1]
    naive = next(int(float(line.split(":")[1])) for line in report.splitlines() if "Naive FLOP count" in line)
    names = [f"in{i}" for i in range(len(shapes))]
    graph = model(
        [node("Einsum", names, ["y"], "ein", equation=equation)],
        [vi(n, F32, list(s)) for n, s in zip(names, shapes)],
        [vi("y", F32, None)],
    )
    assert _flops(graph, "ein") == naive
