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
