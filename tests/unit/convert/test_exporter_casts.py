"""The exporters' own Casts to FP32, visible and sweepable (issue 32 item 7): how much of the model they hold FP32
(FLOPs and nodes), and a sweep dimension ``fp32_casts`` that converts them anyway."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from harness.convert import ConvertOptions, convert
from harness.core.errors import UserError
from harness.sweep import SweepOptions, SweepSpec, build_sweep_spec, expand
from tests.helpers.convert_builders import F32, init, model, node, vi

C, SIDE, PATCH, WIDTH = 3, 16, 4, 8


def clip_like() -> onnx.ModelProto:
    """CLIP's ``pixel_values.to(weight.dtype)``: an FP32 -> FP32 Cast before the patch Conv, then a MatMul head."""
    rng = np.random.default_rng(0)
    tokens = (SIDE // PATCH) ** 2
    return model(
        [
            node("Cast", ["pixels"], ["as_weight"], "to_weight_dtype", to=onnx.TensorProto.FLOAT),
            node("Conv", ["as_weight", "Wp"], ["patches"], "patch_conv", strides=[PATCH, PATCH]),
            node("Reshape", ["patches", "flat"], ["seq"], "flatten"),
            node("Transpose", ["seq"], ["tokens"], "to_tokens", perm=[0, 2, 1]),
            node("MatMul", ["tokens", "Wh"], ["h"], "head"),
            node("Relu", ["h"], ["y"], "relu"),
        ],
        [vi("pixels", F32, [1, C, SIDE, SIDE])],
        [vi("y", F32, [1, tokens, WIDTH])],
        [
            init("Wp", rng.standard_normal((WIDTH, C, PATCH, PATCH)).astype(np.float32) * 0.1),
            init("flat", np.array([1, WIDTH, tokens], np.int64)),
            init("Wh", rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) * 0.1),
        ],
    )


def hand_counts() -> tuple[int, int]:
    """(patch Conv FLOPs, all FLOPs): Conv 2 * out elements * C * PATCH^2, MatMul 2*M*N*K, the rest outputs."""
    tokens = (SIDE // PATCH) ** 2
    conv = 2 * (WIDTH * tokens) * C * PATCH * PATCH
    cast = C * SIDE * SIDE
    rest = WIDTH * tokens * 2 + 2 * tokens * WIDTH * WIDTH + tokens * WIDTH  # reshape, transpose; head; relu
    return conv, conv + cast + rest


def test_the_share_and_nodes_the_exporters_cast_holds() -> None:
    respected = convert(clip_like(), options=ConvertOptions(keep_io_types=True), magnitudes=None)
    conv, total = hand_counts()
    assert [n for n, _ in respected.cast_held()] == ["patch_conv"]
    assert "'as_weight' is an explicit Cast to fp32" in respected.cast_held()[0][1]
    assert respected.cast_held_share == pytest.approx(conv / total)
    ignored = convert(
        clip_like(), options=ConvertOptions(keep_io_types=True, respect_fp32_casts=False), magnitudes=None
    )
    assert ignored.cast_held() == () and ignored.cast_held_share == 0.0
    assert "patch_conv" in ignored.low_nodes and ignored.lowp_flop_share > respected.lowp_flop_share + 0.3


def test_fp32_casts_is_a_sweep_dimension_off_by_default() -> None:
    default = expand(SweepSpec())
    assert len(default) == 12 and all(c.fp32_casts == "respect" and "casts" not in c.id for c in default)
    both = build_sweep_spec(options=SweepOptions(fp32_casts="respect,ignore"))
    cases = expand(both)
    assert len(cases) == 24
    ignored = [c for c in cases if c.fp32_casts == "ignore"]
    assert len(ignored) == 12 and all(c.id.endswith("-casts_ignore") for c in ignored)
    assert all(not c.convert_options().respect_fp32_casts for c in ignored)
    table = build_sweep_spec(tables=[("pyproject.toml [tool.castguard.sweep]", {"fp32_casts": ["ignore"]})])
    assert table.fp32_casts == ("ignore",)
    with pytest.raises(UserError) as err:
        build_sweep_spec(options=SweepOptions(fp32_casts="respect,drop"))
    assert "--fp32-casts" in str(err.value) and "'drop'" in str(err.value)


def test_gemma_style_softmax_in_float32_holds_probs_at_v() -> None:
    """``softmax(scores, dtype=float32).to(query.dtype)`` in an FP32 export: two FP32 -> FP32 Casts, so the
    Softmax and the probs @ V MatMul that read them stay FP32 while respected."""
    heads, steps, head = 2, 8, 4
    graph = model(
        [
            node("MatMul", ["q", "kt"], ["scores"], "qk"),
            node("Cast", ["scores"], ["scores32"], "softmax_dtype", to=onnx.TensorProto.FLOAT),
            node("Softmax", ["scores32"], ["probs32"], "softmax", axis=-1),
            node("Cast", ["probs32"], ["probs"], "to_query_dtype", to=onnx.TensorProto.FLOAT),
            node("MatMul", ["probs", "v"], ["y"], "pv"),
        ],
        [
            vi("q", F32, [1, heads, steps, head]),
            vi("kt", F32, [1, heads, head, steps]),
            vi("v", F32, [1, heads, steps, head]),
        ],
        [vi("y", F32, [1, heads, steps, head])],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    matmul = 2 * heads * steps * steps * head  # qk and pv alike
    scores = heads * steps * steps  # each Cast's and the Softmax's elements
    assert sorted(n for n, _ in result.cast_held()) == ["pv", "softmax"]
    assert result.cast_held_share == pytest.approx((matmul + scores) / (2 * matmul + 3 * scores))
