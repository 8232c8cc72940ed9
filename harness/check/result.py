"""What one check gives the user: :class:`CheckResult`, the verdict and its case record's figures as typed
attributes, and :func:`explain`'s paragraph of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar, overload

from harness.data.goldens import Golden
from harness.report import CaseRecord, OutputStats
from harness.sweep import SweepPoint

T = TypeVar("T")


class _FromRecord(Generic[T]):
    """A :class:`CheckResult` attribute read from its case record: ``empty`` where no case ran (no record)."""

    def __init__(self, read: Callable[[CaseRecord], T], empty: T, doc: str) -> None:
        self._read, self._empty, self.__doc__ = read, empty, doc

    @overload
    def __get__(self, result: None, owner: type) -> _FromRecord[T]: ...
    @overload
    def __get__(self, result: CheckResult, owner: type) -> T: ...
    def __get__(self, result: CheckResult | None, owner: type) -> T | _FromRecord[T]:
        if result is None:
            return self
        return self._empty if result.record is None else self._read(result.record)


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

    outputs = _FromRecord[tuple[OutputStats, ...]](
        lambda r: r.outputs,
        (),
        "Per-output error statistics (max/mean/median/quantile abs and rel error, tolerance...).",
    )
    worst_error = _FromRecord(
        lambda r: r.worst_error, None, "Largest max abs error relative to its output's largest |golden|."
    )
    worst_max_rel = _FromRecord(lambda r: r.worst_max_rel, None, "Largest max rel error over the outputs.")
    lowp_flop_share = _FromRecord(lambda r: r.lowp_flop_share, None, "Share (0..1) of the estimated FLOPs in low type.")
    first_divergence = _FromRecord(
        lambda r: r.first_divergent, None, "The first tensor that leaves FP32 beyond tolerance (failing cases)."
    )
    trt_build = _FromRecord(lambda r: r.trt_build, None, "The TensorRT build check of the model (None: not checked).")
    runner = _FromRecord(lambda r: r.runner, "", "Who produced the outputs (the report's producer string).")

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
