"""The paired judge: the FP32 model and its conversion on the same feeds, compared with the precision policy.

This is the one place that decides "is the converted model close enough to FP32": the sweep's cases
(:mod:`harness.run.case`), the divergence profile (:mod:`harness.diagnose.profile`), the adversarial search
(:mod:`harness.search.adversarial`) and the tests all judge through :func:`judge_outputs` or :class:`Judge`.
The golden side is ORT CPU FP32 (the golden producer); the converted side runs on a rounding runner
(``emulate`` by default), never on a runner that computes low precision in fp32.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
import onnx

from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.judge.compare import CompareResult, Tolerance, compare_iterations, compare_outputs
from harness.judge.tolerances import TolerancePolicy
from harness.runners import Runner, make_runner

__all__ = ["SCORE_CAP", "Judge", "Verdict", "judge_outputs", "score"]

SCORE_CAP = 1e6
"""``target()`` needs a finite number: inf/NaN mismatches and zero-tolerance outputs score this much."""


def judge_outputs(obtained: Sequence[Feed], golden: Sequence[Feed], *, precision: str,
                  policy: TolerancePolicy) -> CompareResult:
    """Compare each iteration's outputs with its golden, tolerances from ``policy`` for ``precision``."""
    tolerances = policy.tolerances_for(precision=precision, goldens=list(golden))
    return compare_iterations(list(obtained), list(golden), tolerances=tolerances, default=Tolerance())


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
        ratios = [value / limit if limit > 0 else (math.inf if value > 0 else 0.0)
                  for value, limit in ((out.max_abs, out.tolerance.atol), (out.max_rel, out.tolerance.rtol))]
        worst = max(worst, min(ratios) if not any(math.isnan(r) for r in ratios) else SCORE_CAP)
    return min(worst, SCORE_CAP)


class Judge:
    """FP32 golden vs converted model, one feed at a time; both sessions stay open inside ``with``.

    Feeds are in the converted model's input dtypes; the golden gets them widened exactly to its own.
    """

    def __init__(self, model: onnx.ModelProto, converted: onnx.ModelProto, *, precision: str,
                 policy: TolerancePolicy = TolerancePolicy(), runner: str = "emulate",
                 model_dir: Path | None = None, converted_dir: Path | None = None) -> None:
        self.precision, self.policy = precision, policy
        self._golden_specs = input_specs(model)
        self._golden: Runner = make_runner("ort", model, model_dir=model_dir)
        self._low: Runner = make_runner(runner, converted, model_dir=converted_dir or model_dir)

    def __enter__(self) -> Judge:
        self._golden.activate()
        try:
            self._low.activate()
        except BaseException:
            self._golden.deactivate()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._low.deactivate()
        self._golden.deactivate()

    def golden_feed(self, feed: Feed) -> Feed:
        return cast_feeds([feed], self._golden_specs)[0]

    def __call__(self, feed: Feed) -> Verdict:
        golden = self._golden.infer(self.golden_feed(feed))
        obtained = self._low.infer(feed)
        tolerances = self.policy.tolerances_for(precision=self.precision, goldens=[golden])
        comparison = compare_outputs(obtained, golden, tolerances=tolerances, default=Tolerance())
        finite = all(bool(np.isfinite(np.asarray(v, dtype=np.float64)).all()) for v in golden.values()
                     if np.asarray(v).dtype.kind == "f")
        return Verdict(comparison=comparison, score=score(comparison), golden_finite=finite)
