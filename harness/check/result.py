"""What one check gives the user: :class:`CheckResult`, the verdict and its case record's figures as typed
attributes, and :func:`explain`'s paragraph of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.data.goldens import Golden
from harness.diagnose.facts import Divergence
from harness.report import CaseRecord, OutputStats
from harness.runners.tensorrt.buildfacts import TrtBuild
from harness.sweep import SweepPoint


@dataclass(frozen=True)
class CheckResult:
    """One checked case: the verdict and the report record's figures as typed attributes."""

    model: str
    case: SweepPoint | None
    status: str  # pass, fail, skip, error (as the report's)
    message: str = ""
    record: CaseRecord | None = None  # None when no case ran (the golden was just written, or FP32 drifted)
    golden_written: bool = False  # the model's golden was written in this run: never an expected failure

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def case_id(self) -> str:
        return "" if self.case is None else self.case.id

    @property
    def outputs(self) -> tuple[OutputStats, ...]:
        """Per-output error statistics (max/mean/median/quantile abs and rel error, tolerance, n_over...)."""
        return () if self.record is None else self.record.outputs

    @property
    def worst_error(self) -> float | None:
        """Largest max abs error relative to its output's largest |golden| (CaseRecord.worst_error)."""
        return None if self.record is None else self.record.worst_error

    @property
    def worst_max_rel(self) -> float | None:
        return None if self.record is None else self.record.worst_max_rel

    @property
    def lowp_flop_share(self) -> float | None:
        """Share (0..1) of the estimated FLOPs that run in the low type."""
        return None if self.record is None else self.record.lowp_flop_share

    @property
    def first_divergence(self) -> Divergence | None:
        """The first tensor that leaves FP32 beyond tolerance (failing cases)."""
        return None if self.record is None else self.record.first_divergent

    @property
    def trt_build(self) -> TrtBuild | None:
        """The TensorRT build check of the converted model (None: not checked)."""
        return None if self.record is None else self.record.trt_build

    @property
    def runner(self) -> str:
        return "" if self.record is None else self.record.runner

    def explain(self) -> str:
        """One paragraph: what was checked, the verdict and its figures, castguard's message."""
        what = f"{self.model} [{self.case_id}]" if self.case is not None else self.model
        parts = [f"castguard {what}: {self.status}"]
        if self.record is not None:
            rec = self.record
            if rec.runner:
                parts.append(f"on {rec.runner}")
            if rec.outputs:
                worst = max(rec.outputs, key=lambda o: o.scaled_error)
                parts.append(
                    f"worst output {worst.name!r}: max abs error {worst.max_abs:.3g} "
                    f"({worst.scaled_error:.3g} of its largest |golden|), max rel {worst.max_rel:.3g}, "
                    f"{worst.n_over} element(s) over tolerance"
                )
            if rec.lowp_flop_share is not None:
                parts.append(f"{rec.lowp_flop_share:.0%} of FLOPs in {rec.case.precision}")
            if rec.first_divergent is not None:
                d = rec.first_divergent
                parts.append(f"first divergence at {d.tensor} ({d.op} node {d.node}, max abs {d.max_abs:.3g})")
            if rec.trt_build is not None:
                parts.append(f"TensorRT build check: {rec.trt_build.outcome}")
        text = "; ".join(parts) + "."
        return f"{text}\n{self.message}" if self.message else text


def golden_written(name: str, path: Path, golden: Golden, recipe_id: str) -> CheckResult:
    return CheckResult(
        model=name,
        case=None,
        status="fail",
        golden_written=True,
        message=(
            f"{name}: golden written in this run (it was missing, or --update-goldens): {path}\n"
            f"  {len(golden.feeds)} iteration(s) from {recipe_id}, produced by {golden.meta.get('producer')}; every "
            "check of this model fails in the run that wrote it, whatever the order\n"
            "  fix: review it, commit it, and rerun these tests: they then compare against it"
        ),
    )
