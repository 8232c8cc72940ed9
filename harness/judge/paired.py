"""The paired judge: FP32 outputs and the converted model's outputs on the same feeds, compared with the precision
policy. Pure: data in, verdict out; it runs no model (the callers do: :mod:`harness.pipeline.steps.execute`,
:class:`harness.search.pairing.PairedRun`).

This is the one place that decides "is the converted model close enough to FP32": the sweep's cases
(:mod:`harness.pipeline.case`), the divergence profile (:mod:`harness.diagnose.profile`), the adversarial search
(:mod:`harness.pipeline.hunt`) and the tests all judge through :func:`judge_outputs` or :func:`judge_feed`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.data.feeds import Feed
from harness.judge.compare import CompareResult, Tolerance, compare_iterations, compare_outputs
from harness.judge.tolerances import TolerancePolicy

__all__ = ["SCORE_CAP", "Verdict", "judge_feed", "judge_outputs", "score"]

SCORE_CAP = 1e6
"""``target()`` needs a finite number: inf/NaN mismatches and zero-tolerance outputs score this much."""


def judge_outputs(
    obtained: Sequence[Feed], golden: Sequence[Feed], *, precision: str, policy: TolerancePolicy, full: bool = True
) -> CompareResult:
    """Compare each iteration's outputs with its golden, tolerances from ``policy`` for ``precision``;
    ``full=False``: the verdict and maxima only (:func:`compare_iterations`)."""
    tolerances = policy.tolerances_for(precision=precision, goldens=list(golden))
    return compare_iterations(list(obtained), list(golden), tolerances=tolerances, default=Tolerance(), full=full)


@dataclass(frozen=True)
class Verdict:
    """One feed's comparison. ``score`` = max over outputs of min(max_abs/atol, max_rel/rtol): above 1,
    some output is over both tolerances somewhere; it is what the search maximises."""

    comparison: CompareResult
    score: float
    golden_finite: bool

    @property
    def failed(self) -> bool:
        """Only a finite golden can be missed; an FP32 overflow is not a low-precision failure."""
        return self.golden_finite and not self.comparison.passed


def score(comparison: CompareResult) -> float:
    worst = 0.0 if comparison.passed else 1.0
    for out in comparison.outputs:
        ratios = [
            value / limit if limit > 0 else (math.inf if value > 0 else 0.0)
            for value, limit in ((out.max_abs, out.tolerance.atol), (out.max_rel, out.tolerance.rtol))
        ]
        worst = max(worst, min(ratios) if not any(math.isnan(r) for r in ratios) else SCORE_CAP)
    return min(worst, SCORE_CAP)


def judge_feed(obtained: Feed, golden: Feed, *, precision: str, policy: TolerancePolicy) -> Verdict:
    """One feed's verdict: the converted model's outputs against the FP32 model's on the same feed."""
    tolerances = policy.tolerances_for(precision=precision, goldens=[golden])
    comparison = compare_outputs(obtained, golden, tolerances=tolerances, default=Tolerance())
    finite = all(
        bool(np.isfinite(np.asarray(v, dtype=np.float64)).all())
        for v in golden.values()
        if np.asarray(v).dtype.kind == "f"
    )
    return Verdict(comparison=comparison, score=score(comparison), golden_finite=finite)
