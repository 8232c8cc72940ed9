"""A case's figures as the report records them: :class:`OutputStats` per output (error statistics and the tolerance
it was judged with, plain numbers) and the :class:`Timings` of its steps."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.judge.compare import CompareResult, ErrorFigures, OutputComparison
from harness.judge.tolerances import golden_scale


@dataclass(frozen=True)
class OutputStats(ErrorFigures):
    """Error statistics of one output (over all iterations) and the tolerance it was judged with.

    Shares :class:`harness.judge.compare.ErrorFigures` with the verdict, but is a separate plain-number record
    rather than the comparison object itself: ``report.json`` is a versioned schema and must not change shape
    when ``compare`` grows a field.
    """

    atol: float
    rtol: float
    mode: str
    quantile: float
    required_atol: float
    required_rtol: float
    golden_absmax: float  # largest finite |golden| of this output (0 when none)
    top_k_agreement: float | None = None
    top1_agreement: float | None = None  # logits (harness.judge.vocab): positions keeping the golden's argmax token
    kl_mean: float | None = None  # logits: mean KL(softmax(golden) || softmax(obtained)) per position, nats

    @property
    def allowed_scaled_error(self) -> float | None:
        """The largest :attr:`scaled_error` this output passes with, in ``elemwise`` mode: an element fails only
        over both atol and rtol x |golden|, so at most max(atol, rtol x golden_absmax) / golden_absmax. None for
        the other modes (a statistic, not the max error, is judged) and for an all-zero golden."""
        if self.mode != "elemwise" or not self.golden_absmax > 0 or not math.isfinite(self.golden_absmax):
            return None
        return max(self.atol, self.rtol * self.golden_absmax) / self.golden_absmax

    @property
    def scaled_error(self) -> float:
        """max_abs / golden_absmax: the error relative to the output's own scale (0/0 = 0, x/0 = inf)."""
        if math.isnan(self.max_abs) or self.max_abs == 0:
            return self.max_abs
        return self.max_abs / self.golden_absmax if self.golden_absmax > 0 else math.inf

    @classmethod
    def from_comparison(cls, comparison: OutputComparison, *, golden_absmax: float) -> OutputStats:
        """Copy the statistics of a :class:`harness.judge.compare.OutputComparison` as plain Python numbers."""
        c, tol = comparison, comparison.tolerance
        return cls(
            name=c.name,
            passed=bool(c.passed),
            reason=c.reason,
            golden_absmax=float(golden_absmax),
            max_abs=float(c.max_abs),
            mean_abs=float(c.mean_abs),
            median_abs=float(c.median_abs),
            quantile_abs=float(c.quantile_abs),
            max_rel=float(c.max_rel),
            mean_rel=float(c.mean_rel),
            median_rel=float(c.median_rel),
            quantile_rel=float(c.quantile_rel),
            n_over=int(c.n_over),
            n_total=int(c.n_total),
            atol=float(tol.atol),
            rtol=float(tol.rtol),
            mode=str(tol.mode),
            quantile=float(tol.quantile),
            required_atol=float(c.required_atol),
            required_rtol=float(c.required_rtol),
            top_k_agreement=None if c.top_k_agreement is None else float(c.top_k_agreement),
            top1_agreement=None if c.top1_agreement is None else float(c.top1_agreement),
            kl_mean=None if c.kl_mean is None else float(c.kl_mean),
        )


@dataclass(frozen=True)
class Timings:
    """Seconds spent per step of one case (shared work such as magnitudes is counted where it ran).

    Each step of :mod:`harness.pipeline.steps` fills its own field, so the named parts add up to ``total_s`` (the
    case's wall time plus its share of the magnitudes) but for the few microseconds between steps.
    """

    magnitudes_s: float = 0.0
    convert_s: float = 0.0
    infer_s: float = 0.0  # inference of the converted model only
    compare_s: float = 0.0
    total_s: float = 0.0
    build_check_s: float = 0.0  # the TensorRT build check (--trt-build-check)
    dedup_s: float = 0.0  # looking for an earlier case with the same converted model
    setup_s: float = 0.0  # creating the runner's session (and preparing the feeds)
    diagnose_s: float = 0.0  # a failing case: the first-divergence search and its message
    speed_s: float = 0.0  # latency measurement (GPU runners)
    record_s: float = 0.0  # saving the outputs and assembling the record
    tune_s: float = 0.0  # a tuned case: the tune, or the stored plan's check (pytest --tune)

    @property
    def parts_s(self) -> float:
        """The named parts together (everything but ``total_s``)."""
        return (
            self.magnitudes_s
            + self.convert_s
            + self.infer_s
            + self.compare_s
            + self.build_check_s
            + self.dedup_s
            + self.setup_s
            + self.diagnose_s
            + self.speed_s
            + self.record_s
            + self.tune_s
        )


def output_stats(result: CompareResult, goldens: Sequence[Mapping[str, np.ndarray]]) -> tuple[OutputStats, ...]:
    """The per-output statistics of a comparison, each with its golden's scale (over every iteration)."""
    scales = {
        o.name: max((golden_scale(it[o.name]) for it in goldens if o.name in it), default=0.0) for o in result.outputs
    }
    return tuple(OutputStats.from_comparison(o, golden_absmax=scales[o.name]) for o in result.outputs)
