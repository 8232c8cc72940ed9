"""The bound: parsing --max_error, the normalized max error, top-1 agreement and the tolerance-policy criterion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.core.errors import UserError
from harness.tune.bound import (
    ERROR_CHUNK,
    Bound,
    error_and_scale,
    measure,
    normalized_errors,
    parse_max_error,
    top1_agreement,
)


def test_parse_max_error_forms() -> None:
    assert parse_max_error(None) == (None, ())
    assert parse_max_error("1e-3") == (1e-3, ())
    assert parse_max_error("logits=1e-3, boxes=5e-3") == (None, (("logits", 1e-3), ("boxes", 5e-3)))
    assert parse_max_error("2e-3,logits=1e-3") == (2e-3, (("logits", 1e-3),))
    for bad in ("0", "-1", "inf", "nan", "x", "1e-3,2e-3", "=1e-3", ""):
        with pytest.raises(UserError, match="--max_error"):
            parse_max_error(bad)


def test_defaults_and_limits() -> None:
    assert Bound(precision="fp16").limit("y") == 1e-3 and Bound(precision="bf16").limit("y") == 1e-2
    bound = Bound(max_error=2e-3, per_output=(("a", 5e-4),))
    assert bound.limit("a") == 5e-4 and bound.limit("b") == 2e-3
    with pytest.raises(UserError, match="min_top1"):
        Bound(min_top1=0.0)
    with pytest.raises(UserError, match="no model output named"):
        Bound(per_output=(("nope", 1e-3),)).check_outputs(["y"])


def test_normalized_error_is_over_all_inputs_and_inf_for_non_finite() -> None:
    gold = [{"y": np.array([1.0, -4.0], np.float32)}, {"y": np.array([2.0, 0.5], np.float32)}]
    got = [{"y": np.array([1.0, -4.002], np.float32)}, {"y": np.array([2.001, 0.5], np.float32)}]
    assert normalized_errors(got, gold)["y"] == pytest.approx(0.002 / 4.0, rel=1e-3)
    broken = [{"y": np.array([1.0, np.inf], np.float32)}, gold[1]]
    assert math.isinf(normalized_errors(broken, gold)["y"])
    assert not measure(broken, gold, Bound()).passed


def test_top1_and_policy_criteria() -> None:
    gold = [{"p": np.array([[0.1, 0.9], [0.6, 0.4]], np.float32)}]
    flipped = [{"p": np.array([[0.1, 0.9], [0.4, 0.6]], np.float32)}]
    assert top1_agreement(flipped, gold, "p") == 0.5
    bound = Bound(max_error=1.0, top1_outputs=("p",), min_top1=1.0)
    assert not measure(flipped, gold, bound).passed
    assert measure(flipped, gold, Bound(max_error=1.0)).passed
    strict = Bound(max_error=1.0, use_policy=True)  # the default policy: a few fp16 ulps
    result = measure(flipped, gold, strict)
    assert not result.passed and result.policy_failures == ("p",)


def test_error_and_scale_matches_the_masked_definition_on_chunks_with_nan_and_inf() -> None:
    """Chunk by chunk, finite chunks the fast way: the same (max |y - gold| where gold is finite, inf where y is not
    finite there; max finite |gold|) as the whole-array masked definition, over chunk boundaries."""
    rng = np.random.default_rng(1)
    for _ in range(60):
        size = int(rng.integers(0, 3 * ERROR_CHUNK))
        gold = (rng.standard_normal(size) * 10).astype(np.float32)
        got = gold + rng.standard_normal(size).astype(np.float32)
        for array in (gold, got):
            hits = int(rng.integers(0, 3)) if size else 0
            array[rng.integers(0, max(size, 1), hits)] = rng.choice([np.nan, np.inf, -np.inf], hits)
        finite = np.isfinite(gold)
        wide_gold, wide_got = gold[finite].astype(np.float64), got[finite].astype(np.float64)
        diff = np.abs(wide_got - wide_gold)
        expected = (
            (math.inf if not np.isfinite(diff).all() else float(diff.max(initial=0.0))),
            float(np.abs(wide_gold).max(initial=0.0)),
        )
        assert error_and_scale([(got, gold)]) == expected


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_error_and_scale_leaves_the_golden_as_it_was(dtype: type) -> None:
    """A float64 golden's chunk is a view of it: taking |gold| in place once made the golden its absolute values."""
    for gold, got in (
        (np.array([-1.0, 2.0, -3.0], dtype=dtype), np.array([-1.5, 2.0, -3.0], dtype=dtype)),  # all finite
        (np.array([-1.0, 2.0, -3.0, np.nan], dtype=dtype), np.array([-1.5, 2.0, -3.0, 0.0], dtype=dtype)),
    ):
        kept = gold.copy()
        assert error_and_scale([(got, gold)]) == (0.5, 3.0)
        np.testing.assert_array_equal(gold, kept)


def _outputs_with_every_kind_of_value(rng: np.random.Generator) -> tuple[list[dict[str, np.ndarray]], ...]:
    """Two iterations of goldens and obtained outputs over chunk boundaries: plain floats (fp32, fp16, bf16, fp64),
    an int8 output holding -128, NaN and inf in goldens (matched or not by the obtained values) and in obtained
    values alone."""
    import ml_dtypes

    size = 2 * ERROR_CHUNK + 17
    gold_its, got_its = [], []
    for iteration in range(2):
        gold = {
            "plain": (rng.standard_normal(size) * 8).astype(np.float32),
            "half": (rng.standard_normal(300) * 100).astype(np.float16),
            "brain": (rng.standard_normal(300) * 100).astype(ml_dtypes.bfloat16),
            "wide": rng.standard_normal(300) * 1e5,
            "ids": np.array([-128, 5, 127, -3], np.int8),
            "golden_nan": (rng.standard_normal(size) * 3).astype(np.float32),
            "got_inf": (rng.standard_normal(500) * 3).astype(np.float32),
        }
        gold["golden_nan"][[3, ERROR_CHUNK + 1]] = [np.nan, np.inf]
        got = {
            name: (v + (rng.standard_normal(v.shape) * 1e-2).astype(v.dtype) if v.dtype.kind == "f" else v.copy())
            for name, v in gold.items()
        }
        got["brain"] = (gold["brain"].astype(np.float32) * 1.01).astype(ml_dtypes.bfloat16)
        got["ids"] = np.array([-128, 6, 127, -3], np.int8)
        got["golden_nan"][[3, ERROR_CHUNK + 1]] = [np.nan, np.inf]  # matched by the obtained values
        if iteration:
            got["got_inf"][7] = np.inf
        gold_its.append(gold)
        got_its.append(got)
    return gold_its, got_its


def test_measure_with_the_golden_scales_reads_each_error_from_the_policy_comparison_and_agrees() -> None:
    """With the tolerance policy and :func:`golden_scales`, the errors the policy's comparison holds are not measured
    again, and every figure of the measurement is the one measured apart, whatever the values: NaN and inf matched
    or not, fp16, bf16, fp64, an int8 output holding -128 (whose |x| overflows in its own type)."""
    from harness.tune import bound as bound_module

    gold, got = _outputs_with_every_kind_of_value(np.random.default_rng(7))
    scales = bound_module.golden_scales(gold)
    assert scales == {
        name: error_and_scale((g[name], g[name]) for g in gold)[1] for name in gold[0]
    }  # the second figure of the measurement apart
    assert scales["ids"] == 128.0
    policy = Bound(max_error=1.0, use_policy=True)
    apart = measure(got, gold, policy)
    measured: list[str] = []
    real = bound_module.scaled_error

    def counted(pairs: object) -> float:
        pairs = list(pairs)  # type: ignore[call-overload]
        measured.append(str(pairs[0][1].dtype))
        return real(pairs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bound_module, "scaled_error", counted)
        fused = measure(got, gold, policy, scales=scales)
    assert fused == apart
    assert math.isinf(dict(fused.errors)["got_inf"])
    assert len(measured) == 1  # only the output with an infinity the golden lacks is measured again
    assert len(measure(got, gold, Bound(max_error=1.0), scales=scales).errors) == len(gold[0])  # no policy: apart
