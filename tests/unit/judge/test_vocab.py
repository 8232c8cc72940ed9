"""Logits judged the way LLM people do: top-1 token agreement and mean KL, without configuration, and rules on them
(a tolerance key and a nightly rule) that fail a case."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, convert
from harness.data.feeds import cast_feeds, input_specs
from harness.judge.compare import Tolerance, compare_outputs
from harness.judge.paired import judge_outputs
from harness.judge.tolerances import TolerancePolicy, parse_tolerance_policy
from harness.nightly.comparison import judge
from harness.nightly.rules import parse_rule
from harness.report.figures import OutputStats
from harness.runners import make_runner
from tests.helpers.graphs import make_model

VOCAB = 1536


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_logits_get_top1_and_kl_without_configuration() -> None:
    rng = np.random.default_rng(0)
    gold = rng.standard_normal((2, 8, VOCAB)).astype(np.float32) * 3
    got = gold + rng.standard_normal(gold.shape).astype(np.float32) * 0.01
    flipped = gold.reshape(-1, VOCAB).argmax(axis=1)[:4]
    view = got.reshape(-1, VOCAB)
    view[np.arange(4), flipped] -= 100.0  # four positions lose their top token
    (out,) = compare_outputs({"logits": got}, {"logits": gold}, tolerances={}, default=Tolerance()).outputs
    assert out.top1_agreement == pytest.approx(12 / 16)
    p, q = _softmax(gold.astype(np.float64)), _softmax(got.astype(np.float64))
    expected = float(np.mean(np.sum(p * (np.log(p) - np.log(q)), axis=-1)))  # an independent KL
    assert out.kl_mean == pytest.approx(expected, rel=1e-6)
    (other,) = compare_outputs({"hidden": got}, {"hidden": gold}, tolerances={}, default=Tolerance()).outputs
    assert other.top1_agreement is None and other.kl_mean is None  # not named like logits
    (named,) = compare_outputs(
        {"out": got}, {"out": gold}, tolerances={"out": Tolerance(vocab=True)}, default=Tolerance()
    ).outputs
    assert named.top1_agreement == pytest.approx(12 / 16)  # the user names it


def test_non_finite_logits_take_the_careful_kl_and_finite_ones_the_fast_one() -> None:
    """A masked token (-inf in both) costs nothing, a NaN row is an infinite KL, and every finite row gets the KL of
    the two log-softmaxes, whichever way its chunk was reduced."""
    rng = np.random.default_rng(2)
    gold = rng.standard_normal((4, VOCAB)).astype(np.float32) * 3
    got = gold + rng.standard_normal(gold.shape).astype(np.float32) * 0.05
    p, q = _softmax(gold.astype(np.float64)), _softmax(got.astype(np.float64))
    finite = np.sum(p * (np.log(p) - np.log(q)), axis=-1)
    (fast,) = compare_outputs({"logits": got}, {"logits": gold}, tolerances={}, default=Tolerance()).outputs
    assert fast.kl_mean == pytest.approx(float(finite.mean()), rel=1e-9)
    masked_gold, masked_got = gold.copy(), got.copy()
    masked_gold[0, 7] = masked_got[0, 7] = -np.inf  # a masked token in both: probability 0 on each side
    kept = np.arange(VOCAB) != 7
    p0, q0 = _softmax(gold[0, kept].astype(np.float64)), _softmax(got[0, kept].astype(np.float64))
    row0 = float(np.sum(p0 * (np.log(p0) - np.log(q0))))
    (masked,) = compare_outputs(
        {"logits": masked_got}, {"logits": masked_gold}, tolerances={}, default=Tolerance()
    ).outputs
    assert masked.kl_mean == pytest.approx((row0 + float(finite[1:].sum())) / 4, rel=1e-9)
    broken = got.copy()
    broken[2, 3] = np.nan
    (nan,) = compare_outputs({"logits": broken}, {"logits": gold}, tolerances={}, default=Tolerance()).outputs
    assert nan.kl_mean == math.inf and nan.top1_agreement == pytest.approx(1.0)


def lm_head(width: int = 32) -> tuple:  # type: ignore[type-arg]
    rng = np.random.default_rng(1)
    weight = (rng.standard_normal((width, VOCAB)) * 2).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["h", "w"], ["logits"], name="lm_head")]
    model = make_model(
        nodes,
        [("h", TensorProto.FLOAT, [1, 16, width])],
        [("logits", TensorProto.FLOAT, [1, 16, VOCAB])],
        initializers=[numpy_helper.from_array(weight, "w")],
    )
    feeds = [{"h": rng.standard_normal((1, 16, width)).astype(np.float32) * 4}]
    return model, feeds


def test_a_tolerance_rule_on_kl_or_top1_fails_a_case() -> None:
    model, feeds = lm_head()
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    golden = make_runner("ort", model).run(feeds).outputs
    obtained = make_runner("emulate", converted).run(cast_feeds(feeds, input_specs(converted))).outputs
    plain = judge_outputs(obtained, golden, precision="fp16", policy=TolerancePolicy())
    (out,) = plain.outputs
    assert out.kl_mean is not None and 0 < out.kl_mean < 1e-3 and out.top1_agreement is not None
    strict = parse_tolerance_policy({"logits": {"max_kl": out.kl_mean / 2}}, where="pyproject.toml")
    verdict = judge_outputs(obtained, golden, precision="fp16", policy=strict)
    assert not verdict and "mean KL" in verdict.outputs[0].reason
    top1 = parse_tolerance_policy({"fp16": {"outputs": {"logits": {"min_top1_agreement": 1.0}}}}, where="x")
    assert bool(judge_outputs(obtained, golden, precision="fp16", policy=top1)) == (out.top1_agreement == 1.0)
    assert "top-1 token agreement" in plain.summary()


def test_nightly_rules_read_the_logits_figures() -> None:
    stats = OutputStats(
        name="logits",
        passed=True,
        reason="",
        max_abs=0.1,
        mean_abs=0.0,
        median_abs=0.0,
        quantile_abs=0.0,
        max_rel=0.0,
        mean_rel=0.0,
        median_rel=0.0,
        quantile_rel=0.0,
        n_over=0,
        n_total=1,
        atol=1.0,
        rtol=1.0,
        mode="elemwise",
        quantile=0.99,
        required_atol=0.0,
        required_rtol=0.0,
        golden_absmax=1.0,
        top1_agreement=0.99,
        kl_mean=1e-3,
    )
    from harness.sweep import SweepPoint
    from tests.helpers.report_samples import record_for

    before = dataclasses.replace(record_for(SweepPoint()), outputs=(stats,))
    worse = dataclasses.replace(before, outputs=(dataclasses.replace(stats, top1_agreement=0.95, kl_mean=3e-3),))
    top1 = judge(before, worse, parse_rule("top_token:-1pp"))
    kl = judge(before, worse, parse_rule("kl:+50%"))
    assert top1 is not None and top1[0] and kl is not None and kl[0]
    assert judge(before, before, parse_rule("kl:+50%")) is None
