"""Display helpers shared by the markdown and HTML renderers (formatting only, no verdicts)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from harness.data.degenerate import Degenerate
from harness.report.model import STATUSES, CaseRecord, Report
from harness.sweep import PRECISIONS

DISPLAY_ORDER = ("error", "fail", "xpass", "xfail", "skip", "pass")  # failing cases first
LEGEND = (
    (
        "status",
        "the test outcome: pass, fail, error (could not run), xfail (expected failure, failed), "
        "xpass (expected failure, passed), skip",
    ),
    (
        "worst error",
        "largest |obtained - golden| divided by the largest |golden| of the same output, over all "
        "outputs (the y axis of the plot); inf for overflow or NaN",
    ),
    (
        "worst max_rel",
        "largest element-wise |obtained - golden| / |golden|; large when a golden value is near "
        "zero, which is why the tolerance also has an absolute part",
    ),
    ("lowp FLOP share", "share of the model's FLOPs that run in fp16/bf16 after conversion"),
    ("casts", "Casts the conversion inserted (in the converted model; the model's own Casts are not counted)"),
    ("first divergent", "for failing cases, the first tensor in graph order beyond tolerance: name (op) max_rel"),
)


def completion_text(report: Report) -> str:
    """``interrupted after 5 of 24 cases`` for an interrupted run (``incomplete: 20 of 24 cases (shard 2/3
    killed)`` for a merged one), else ``""``."""
    if not report.interrupted:
        return ""
    planned = "" if report.planned_cases is None else f" of {report.planned_cases}"
    if report.shards:
        bad = ", ".join(f"shard {s.index}/{s.count} {s.state}" for s in report.shards if s.state != "complete")
        return f"incomplete: {len(report.cases)}{planned} cases ({bad})"
    reached = sum(c.stopped != "not_reached" for c in report.cases)
    return f"interrupted after {reached}{planned} cases"


SHARD_COLUMNS = ("shard", "state", "cases", "host", "GPU", "python", "onnxruntime", "castguard", "commit", "folder")


def shard_rows(report: Report) -> list[tuple[str, ...]]:
    """A merged report's shards, one row each (:data:`SHARD_COLUMNS`), then why a shard is not complete."""
    rows: list[tuple[str, ...]] = []
    for shard in report.shards:
        prov = shard.provenance
        where = (
            ("–",) * 6
            if prov is None
            else (
                prov.hostname,
                prov.gpu or "none",
                prov.python,
                prov.onnxruntime,
                prov.castguard,
                (prov.git_commit or "–")[:12],
            )
        )
        rows.append(
            (
                f"{shard.index}/{shard.count}",
                shard.state + (f": {shard.note}" if shard.note else ""),
                f"{shard.cases} of {shard.assigned}" if prov is not None else "–",
                *where,
                shard.folder or "–",
            )
        )
    return rows


def shard_line(report: Report) -> str:
    """A shard's own report: which part of the sweep it holds (``""`` for any other report)."""
    if report.shard is None:
        return ""
    part = report.shard.part
    models = f"{len(part.work)} of {len(part.models)} models, {part.case_count} of {part.total_cases} cases"
    return (
        f"Shard {part.shard.text} of a sharded sweep: {models}. Merge the shards' report folders with "
        "`castguard merge SHARD_DIR... --out DIR` for the night's report and verdict."
    )


def display_sorted(cases: Iterable[CaseRecord]) -> list[CaseRecord]:
    """Failing cases first (error, fail, xpass, xfail, skip, pass), then by settings (data_max numerically)."""
    return sorted(
        cases,
        key=lambda c: (
            DISPLAY_ORDER.index(c.status),
            PRECISIONS.index(c.case.precision),
            c.case.data_max,
            c.case.init_max,
            c.case_id,
            c.inputs_id,
        ),
    )


def accuracy_ok(status: str) -> bool | None:
    """Whether the comparison itself passed: pass/xpass yes, fail/xfail no, error/skip unknown."""
    return {"pass": True, "xpass": True, "fail": False, "xfail": False}.get(status)


def fmt_error(value: float | None) -> str:
    if value is None:
        return "–"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return "0" if value == 0 else f"{value:.2e}"


def fmt_share(value: float | None, bound: str | None = None) -> str:
    """A FLOP share in percent; "<= x%" when it is only an upper bound (``CaseRecord.lowp_share_bound``)."""
    return "–" if value is None else f"{'<= ' if bound else ''}{100.0 * value:.1f}%"


def fmt_int(value: int | None) -> str:
    return "–" if value is None else str(value)


def fmt_divergence(case: CaseRecord) -> str:
    d = case.first_divergent
    return "–" if d is None else f"{d.tensor} ({d.op}) {fmt_error(d.max_rel)}"


def counts_text(counts: Mapping[str, int]) -> str:
    """``"24 cases: 20 pass, 3 fail, 1 error"`` (zero counts left out)."""
    total = sum(counts.values())
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts.get(s)]
    return f"{total} case{'s' if total != 1 else ''}" + (": " + ", ".join(parts) if parts else "")


def case_notes(case: CaseRecord) -> tuple[str, ...]:
    """The case's notes as shown: its own display notes, then its facts in words (the reuse of another case's
    result is not among them: it is shown next to the case, :attr:`CaseRecord.reused_from`)."""
    facts = []
    if case.conversion_cached:
        facts.append("conversion from cache")
    if case.trt_build_skipped:
        facts.append(f"TensorRT build check not run: {case.trt_build_skipped}")
    if case.same_plan_as is not None:
        facts.append(f"same precision plan as {case.same_plan_as}")
    facts += [degenerate_text(d) for d in case.degenerate]
    facts += conversion_facts(case)
    if case.cpu_float_nodes:
        facts.append(
            f"{len(case.cpu_float_nodes)} float node(s) ran on the CPU EP, not the GPU: "
            + ", ".join(case.cpu_float_nodes[:8])
        )
    return (*case.notes, *facts)


def degenerate_text(found: Degenerate) -> str:
    """A degenerate golden output in words (:attr:`CaseRecord.degenerate`): said on every run, not once."""
    why = (
        "no low-precision error can show against it" if found.kind == "not_finite" else "the inputs do not exercise it"
    )
    return f"degenerate golden: {found.describe()}; {why} (check the inputs: --val-range, --inputs)"


def degenerate_lines(report: Report) -> list[str]:
    """One summary line per model and input set whose golden is degenerate (every run's terminal summary)."""
    seen: dict[tuple[str, str], tuple[Degenerate, ...]] = {}
    for case in report.cases:
        if case.degenerate:
            seen.setdefault((case.model, case.inputs_id), case.degenerate)
    return [
        f"castguard: {model} [{inputs}]: " + "; ".join(degenerate_text(d) for d in found)
        for (model, inputs), found in seen.items()
    ]


NAMED = 5
"""Nodes named in a conversion fact (the report.json fields hold them all)."""


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:NAMED]) + (", ..." if len(names) > NAMED else "")


def conversion_facts(case: CaseRecord) -> list[str]:
    """What the model's own FP32 Casts hold and whether it is a QDQ model, in words (report notes, run summary)."""
    facts = []
    held = [] if case.case.tuned else [node for node, _ in case.kept_fp32]
    if held and case.fp32_cast_share is not None:
        facts.append(
            f"the model's own Casts to FP32 keep {len(held)} node(s) FP32, {100 * case.fp32_cast_share:.1f}% of "
            f'FLOPs ({_names(held)}); sweep fp32_casts = ["respect", "ignore"] to measure converting them'
        )
    if case.qdq_kept:
        facts.append(
            f"QDQ model: {len(case.qdq_kept)} node(s) kept in their quantized/FP32 types, DQ -> op -> Q never split "
            f"by Casts ({_names(case.qdq_kept)}); the rest is converted"
        )
    return facts


def summary_facts(cases: Iterable[CaseRecord]) -> list[str]:
    """The run summary's lines about conversions: per model, whether it is a QDQ model and what its own FP32
    Casts hold (from its first case that says so)."""
    lines: dict[tuple[str, str], str] = {}
    for case in cases:
        for fact in conversion_facts(case):
            kind = fact.partition(":")[0] if fact.startswith("QDQ") else "casts"
            lines.setdefault((case.model, kind), f"castguard: {case.model}: {fact}")
    return list(lines.values())


def reuse_text(case: CaseRecord) -> str:
    """``same model as <case>`` (and how it matched) for a case that reuses another's result, else ``""``."""
    if case.reused_from is None:
        return ""
    return f"same model as {case.reused_from}" + (" (identical precision plan)" if case.reuse_kind == "plan" else "")


def case_label(case: CaseRecord, *, with_inputs: bool) -> str:
    """The case id, plus its input set when a model was swept over several."""
    return f"{case.case_id} [{case.inputs_id}]" if with_inputs else case.case_id


def grouped_notes(cases: Iterable[CaseRecord]) -> list[tuple[str, list[str]]]:
    """Each distinct case note (e.g. golden provenance drift) with the labels of the cases that carry it."""
    cases = list(cases)
    multi = len({c.inputs_id for c in cases}) > 1
    groups: dict[str, list[str]] = {}
    for case in cases:
        for note in case_notes(case):
            groups.setdefault(note, []).append(case_label(case, with_inputs=multi))
        if case.lowp_share_bound:
            groups.setdefault(f"lowp FLOP share is an upper bound: {case.lowp_share_bound}", []).append(
                case_label(case, with_inputs=multi)
            )
    return list(groups.items())


def tuned_plan_lines(cases: Iterable[CaseRecord]) -> list[tuple[CaseRecord, str, list[tuple[str, str]]]]:
    """Per tuned case: the case, a one-line summary, and (node, why) for each node its plan keeps FP32."""
    found = []
    for case in cases:
        if not case.case.tuned:
            continue
        head = (
            f"{len(case.kept_fp32)} node(s) kept FP32 by the search, {fmt_share(case.lowp_flop_share, case.lowp_share_bound)} of FLOPs "
            f"in {case.case.precision}, worst error {fmt_error(case.worst_error)} ({case.status})"
        )
        moved = set(case.moved_fp32)
        found.append(
            (
                case,
                head,
                [(n, ("moved to FP32 by the re-tune: " if n in moved else "") + why) for n, why in case.kept_fp32],
            )
        )
    return found
