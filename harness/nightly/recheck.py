"""Re-judge a finished sweep with new tolerances, from its saved outputs: no conversion, no inference.

``castguard recheck REPORT_DIR --atol 1e-2 --rtol 1e-3 --check-error-stat median`` reads ``report.json``,
and for every case that saved its obtained outputs loads them and the golden it was compared with
(``outputs/...npz``, ``allow_pickle=False``, paths confined to the report folder) and compares them again with
:func:`harness.judge.compare.compare_iterations` (the same code as the run). Each output keeps the tolerance it was
judged with (atol, rtol, mode, quantile as recorded); only what is given is replaced, for every output or,
Polygraphy style, per output (``--atol logits:1e-2``). The recomputed error statistics must equal the
recorded ones, which proves the saved files belong to the report; a case where they do not is an error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from harness.core.errors import UserError
from harness.judge.compare import MODES, CompareResult, Tolerance, compare_iterations
from harness.report.figures import OutputStats
from harness.report.io import load_outputs, read_report
from harness.report.model import CaseRecord

T = TypeVar("T")
PerOutput = tuple[tuple[str, T], ...]  # ("" = every output, else an output name)
_CHECKED_STATS = ("max_abs", "mean_abs", "median_abs", "max_rel", "mean_rel", "median_rel", "n_total")


@dataclass(frozen=True)
class ToleranceOverride:
    """The tolerance fields to replace; empty means "judge exactly as recorded"."""

    atol: PerOutput[float] = ()
    rtol: PerOutput[float] = ()
    mode: PerOutput[str] = ()
    quantile: PerOutput[float] = ()

    def __post_init__(self) -> None:
        for field in ("atol", "rtol", "mode", "quantile"):
            names = [name for name, _ in getattr(self, field)]
            if len(set(names)) != len(names):
                raise UserError(
                    where=f"--{field}",
                    problem=f"an output is given twice in {names}",
                    fix="give each output (or the bare default) once",
                )

    def apply(self, output: str, recorded: Tolerance) -> Tolerance:
        """``recorded`` with every field this override sets for ``output`` (a named entry beats the default)."""
        changes: dict[str, Any] = {}
        for field in ("atol", "rtol", "mode", "quantile"):
            values = dict(getattr(self, field))
            if output in values or "" in values:
                changes[field] = values[output] if output in values else values[""]
        try:
            return replace(recorded, **changes)
        except ValueError as err:
            raise UserError(where="castguard recheck", problem=str(err), fix="give valid tolerances") from err

    def unknown_outputs(self, known: set[str]) -> list[str]:
        return sorted({n for f in ("atol", "rtol", "mode", "quantile") for n, _ in getattr(self, f) if n} - known)


def parse_per_output(values: Sequence[str], convert: Callable[[str], T], *, where: str) -> PerOutput[T]:
    """Polygraphy's ``[OUTPUT:]VALUE`` list, e.g. ``["1e-3", "logits:1e-2"]``."""
    parsed = []
    for text in values:
        name, colon, raw = text.rpartition(":")
        try:
            parsed.append((name if colon else "", convert(raw)))
        except ValueError as err:
            raise UserError(
                where=f"{where} {text!r}", problem=str(err), fix=f"write {where} VALUE or {where} OUTPUT:VALUE"
            ) from err
    return tuple(parsed)


def error_stat(text: str) -> str:
    if text not in MODES:
        raise ValueError(f"{text!r} is not one of {', '.join(MODES)}")
    return text


def non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise ValueError(f"{text!r} is not a number >= 0")
    return value


@dataclass(frozen=True)
class RecheckedCase:
    """One case before and after.

    ``comparison`` is None when the case could not be rechecked; ``reason`` then says why.
    """

    record: CaseRecord
    status: str
    comparison: CompareResult | None = None
    reason: str = ""
    broken: bool = False  # the saved files do not match the report

    @property
    def changed(self) -> bool:
        return self.status != self.record.status


@dataclass(frozen=True)
class RecheckResult:
    report_dir: Path
    cases: tuple[RecheckedCase, ...]
    seconds: float

    @property
    def rechecked(self) -> int:
        return sum(c.comparison is not None for c in self.cases)

    def summary(self) -> str:
        """What a person reads: counts, then every case whose status changed or could not be rechecked."""
        changed = [c for c in self.cases if c.changed]
        lines = [
            f"{self.rechecked} of {len(self.cases)} case(s) rechecked in {self.seconds:.2f} s from "
            f"{self.report_dir}; {len(changed)} changed"
        ]
        counts = {s: sum(c.status == s for c in self.cases) for s in dict.fromkeys(c.status for c in self.cases)}
        lines.append("now: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
        for case in changed:
            detail = case.reason or (case.comparison.summary().splitlines()[0] if case.comparison else "")
            lines.append(
                f"  {case.record.model} / {case.record.case_id}: {case.record.status} -> {case.status}"
                + (f" ({detail})" if detail else "")
            )
        skipped = [c for c in self.cases if c.comparison is None and not c.changed]
        if skipped:
            lines.append(f"  not rechecked: {len(skipped)} case(s) without saved outputs (error or skip)")
        return "\n".join(lines)

    @property
    def exit_code(self) -> int:
        """1 when a rechecked case now fails (or passes while expected to fail) or its files are broken, else 0."""
        return (
            1
            if any(c.broken or (c.comparison is not None and c.status in ("fail", "xpass")) for c in self.cases)
            else 0
        )


def recorded_tolerance(stats: OutputStats) -> Tolerance:
    mode: Any = stats.mode  # a str in the report; Tolerance checks it is a known mode
    return Tolerance(atol=stats.atol, rtol=stats.rtol, mode=mode, quantile=stats.quantile)


def recheck(report_dir: Path, *, override: ToleranceOverride) -> RecheckResult:
    """Re-judge every case of ``report_dir`` that saved its outputs; see the module docstring."""
    start = time.perf_counter()
    report = read_report(report_dir / "report.json")
    unknown = override.unknown_outputs({o.name for c in report.cases for o in c.outputs})
    if unknown:
        raise UserError(
            where="castguard recheck",
            problem=f"no case in {report_dir} has output(s) {unknown}",
            fix="name outputs as they appear in report.json, or give a bare value for every output",
        )
    goldens: dict[str, list[dict[str, np.ndarray]]] = {}
    cases = tuple(_recheck_case(report_dir, record, override, goldens) for record in report.cases)
    return RecheckResult(report_dir=report_dir, cases=cases, seconds=time.perf_counter() - start)


def _recheck_case(
    report_dir: Path, record: CaseRecord, override: ToleranceOverride, goldens: dict[str, list[dict[str, np.ndarray]]]
) -> RecheckedCase:
    if record.outputs_file is None or record.golden_file is None or not record.outputs:
        return RecheckedCase(
            record=record, status=record.status, reason=f"nothing to recheck ({record.status}: no saved outputs)"
        )
    obtained = load_outputs(report_dir, record.outputs_file)
    if record.golden_file not in goldens:
        goldens[record.golden_file] = load_outputs(report_dir, record.golden_file)
    tolerances = {o.name: override.apply(o.name, recorded_tolerance(o)) for o in record.outputs}
    comparison = compare_iterations(obtained, goldens[record.golden_file], tolerances=tolerances, default=Tolerance())
    mismatch = _stats_mismatch(record, comparison)
    if mismatch:
        return RecheckedCase(
            record=record,
            status="error",
            broken=True,
            reason=f"the saved outputs do not reproduce the recorded statistics ({mismatch}); re-run the sweep",
        )
    return RecheckedCase(record=record, status=_new_status(record.status, comparison.passed), comparison=comparison)


def _stats_mismatch(record: CaseRecord, comparison: CompareResult) -> str:
    got = {o.name: o for o in comparison.outputs}
    if set(got) != {o.name for o in record.outputs} or comparison.missing or comparison.extra:
        return f"outputs {sorted(got)} vs recorded {sorted(o.name for o in record.outputs)}"
    for stats in record.outputs:
        for field in _CHECKED_STATS:
            a, b = float(getattr(stats, field)), float(getattr(got[stats.name], field))
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                return f"{stats.name} {field}: recorded {a!r}, recomputed {b!r}"
    return ""


def _new_status(old: str, passed: bool) -> str:
    if old in ("xfail", "xpass"):
        return "xpass" if passed else "xfail"
    if old == "skip":  # a runner that is not a low-precision oracle: stays a skip
        return old
    return "pass" if passed else "fail"
