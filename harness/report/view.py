"""One view of a report, built once: what every rendering shows (pure; no drawing, no files).

:func:`report_view` orders the cases, finds the best passing case and the Pareto front, lists the speed rows, the
TensorRT headline and findings, the tuned plans and the grouped notes, per model and for the whole report.
``report.md`` (:mod:`.render_md`), ``report.html`` (:mod:`.render_html`), the terminal summary
(:func:`trt_terminal_lines`, :meth:`harness.report.collect.FinishedReport.summary_line`) and
``castguard merge`` (which writes through :class:`harness.report.collect.ReportSession`) render this view; none
of them recomputes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.report.converters import ConverterRow, converter_rows
from harness.report.format import display_sorted, grouped_notes, tuned_plan_lines
from harness.report.model import CaseRecord, Report
from harness.report.pareto import best_passing, front_points
from harness.report.speed import speed_notes, speed_rows
from harness.report.trt_view import MD_NODE_ROWS, findings, headline, node_tables
from harness.runners.tensorrt.buildfacts import NODE_ROWS, TrtBuild

SpeedRow = tuple[CaseRecord, str, str, str, str, bool, str]  # case, latency, FP32, speedup, error, front, end to end
NodeTable = tuple[list[str], TrtBuild]  # case ids sharing one per-node types table, the build


@dataclass(frozen=True)
class ModelView:
    """One model's part of the report, ready to render."""

    name: str
    cases: tuple[CaseRecord, ...]  # display order: failing first (format.DISPLAY_ORDER)
    counts: Mapping[str, int]
    inputs: tuple[str, ...]  # input set ids
    best: CaseRecord | None  # the best passing case (fastest measured, else largest share)
    front: tuple[tuple[CaseRecord, ...], ...]  # the Pareto front of share vs error: cases per marked point
    speed_rows: tuple[SpeedRow, ...]
    speed_notes: tuple[str, ...]  # why cases claim no speed
    trt_headline: str | None  # None: no case was build-checked
    trt_findings: tuple[tuple[str, list[str]], ...]
    trt_tables: tuple[NodeTable, ...]  # per-node types of builds up to NODE_ROWS nodes (report.html)
    trt_tables_md: tuple[NodeTable, ...]  # ... up to MD_NODE_ROWS nodes (report.md)
    tuned: tuple[tuple[CaseRecord, str, list[tuple[str, str]]], ...]
    notes: tuple[tuple[str, list[str]], ...]  # each distinct note with the labels of the cases carrying it
    converters: tuple[ConverterRow, ...] = ()  # the converters side by side (empty: one converter)

    @property
    def multi_inputs(self) -> bool:
        """The model was swept over several input sets (case labels then name theirs)."""
        return len(self.inputs) > 1

    @property
    def failing(self) -> tuple[CaseRecord, ...]:
        """Cases shown with their messages: error, fail, xpass, xfail (display order)."""
        return tuple(c for c in self.cases if c.status in ("error", "fail", "xpass", "xfail"))

    @property
    def failure_groups(self) -> tuple[tuple[CaseRecord, ...], ...]:
        """The failing cases, one group per distinct result: a case that reuses another's converted model (same
        result, not run again) joins that case's group, which it follows; display order otherwise."""
        groups: dict[tuple[str, str], list[CaseRecord]] = {}
        for case in self.failing:
            groups.setdefault((case.inputs_id, case.reused_from or case.case.id), []).append(case)
        return tuple(tuple(sorted(g, key=lambda c: c.reused_from is not None)) for g in groups.values())

    @property
    def logits(self) -> tuple[tuple[CaseRecord, str, float, float], ...]:
        """Outputs judged as logits (:mod:`harness.judge.vocab`), case by case: (case, output name, top-1 token
        agreement, mean KL)."""
        return tuple(
            (c, o.name, o.top1_agreement, o.kl_mean)
            for c in self.cases
            for o in c.outputs
            if o.top1_agreement is not None and o.kl_mean is not None
        )

    @property
    def build_checked(self) -> bool:
        return any(c.trt_build is not None for c in self.cases)


@dataclass(frozen=True)
class ReportView:
    """The whole report, ready to render: the report itself, one :class:`ModelView` per model, and the totals."""

    report: Report
    models: tuple[ModelView, ...]
    reused: int  # cases that reuse another case's result (not run again; under xdist it depends on scheduling)
    shared_models: int  # cases whose converted model is identical to an earlier case's (the same on every run)
    trt_headline: str | None
    trt_findings: tuple[tuple[str, list[str]], ...]


def shared_models(cases: Sequence[CaseRecord]) -> int:
    """Cases whose converted graph (same model, inputs and runner) is another case's too, the first of each
    group not counted: decided by the graphs, so the same whichever xdist worker ran which case."""
    keyed = [(c.model, c.inputs_id, c.runner, c.converted_digest) for c in cases if c.converted_digest]
    return len(keyed) - len(set(keyed))


def model_view(name: str, report: Report) -> ModelView:
    cases = report.cases_of(name)
    return ModelView(
        name=name,
        cases=tuple(display_sorted(cases)),
        counts=report.counts(name),
        inputs=tuple(sorted({c.inputs_id for c in cases})),
        best=best_passing(cases),
        front=tuple(tuple(group) for group in front_points(cases)),
        speed_rows=tuple(speed_rows(cases)),
        speed_notes=tuple(speed_notes(cases)),
        trt_headline=headline(cases),
        trt_findings=tuple(findings(cases)),
        trt_tables=tuple(node_tables(cases, max_rows=NODE_ROWS)),
        trt_tables_md=tuple(node_tables(cases, max_rows=MD_NODE_ROWS)),
        tuned=tuple(tuned_plan_lines(cases)),
        notes=tuple(grouped_notes(cases)),
        converters=converter_rows(cases),
    )


def report_view(report: Report) -> ReportView:
    """Build the view of ``report``; see the module docstring."""
    return ReportView(
        report=report,
        models=tuple(model_view(name, report) for name in report.models),
        reused=sum(c.reused_from is not None for c in report.cases),
        shared_models=shared_models(report.cases),
        trt_headline=headline(report.cases),
        trt_findings=tuple(findings(report.cases)),
    )


def trt_terminal_lines(view: ReportView) -> list[str]:
    """What the terminal summary says about the build check (nothing when no case was checked), from the report's
    one view (:func:`harness.report.view.report_view`)."""
    head = view.trt_headline
    if head is None:
        return []
    lines = [f"castguard: {head}"]
    for said, labels in view.trt_findings:
        shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
        lines.append(f"  {shown}: {said}")
    return lines
