"""``report.md``: tables readable in a CI log and in a GitHub step summary. Formatting only.

Names from models (tensors, messages) are put in code spans with table pipes escaped, so markdown
and HTML in them are shown, never interpreted.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from harness.report.format import (LEGEND, SHARD_COLUMNS, case_label, completion_text, counts_text, display_sorted,
                                   first_line, fmt_divergence, same_model_as, shard_line, shard_rows,
                                   fmt_error, fmt_int, fmt_share, grouped_notes, tuned_plan_lines)
from harness.report.model import CaseRecord, Report
from harness.report.pareto import best_passing
from harness.report.speed import speed_notes, speed_rows
from harness.report.trt_view import MD_NODE_ROWS, findings, headline, node_tables, plan_mark, trt_cell

_HEADER = ("| case | status | runner | worst error | worst max_rel | lowp FLOP share | casts | first divergent tensor |\n"
           "|---|---|---|---:|---:|---:|---:|---|")


def md_code(text: str, *, in_table: bool) -> str:
    """``text`` as one inline code span: newlines become spaces; in table rows pipes are escaped (GFM)."""
    flat = text.replace("\r", " ").replace("\n", " ")
    flat = flat.replace("|", "\\|") if in_table else flat
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _speed_lines(cases: Sequence[CaseRecord], *, multi: bool) -> list[str]:
    """The measured speed (GPU runners) as a table, or why the cases claim none."""
    rows = speed_rows(cases)
    lines: list[str] = []
    if rows:
        lines += ["", "Speed (measured; front = Pareto front of speedup vs error):", "",
                  "| case | status | latency ms | FP32 ms | speedup | worst error | |", "|---|---|---:|---:|---:|---:|---|"]
        lines += [f"| {md_code(case_label(c, with_inputs=multi), in_table=True)} | {c.status} | {ms} | {fp32} | {up} | "
                  f"{err} | {'front' if front else ''} |" for c, ms, fp32, up, err, front in rows]
    for note in speed_notes(cases):
        lines += ["", f"No speed claimed: {note}."]
    return lines


def _trt_lines(cases: Sequence[CaseRecord]) -> list[str]:
    """The TensorRT build check: what did not build, and per-node types (ONNX plan next to TensorRT) of small models."""
    head = headline(cases)
    if head is None:
        return []
    lines = ["", f"{head}."]
    lines += ["", *(f"- {md_code(said, in_table=False)} ({', '.join(md_code(c, in_table=False) for c in labels)})"
              for said, labels in findings(cases))] if findings(cases) else []
    for ids, build in node_tables(cases, max_rows=MD_NODE_ROWS):
        lines += ["", f"Types per ONNX node, converted model vs {build.backend} ({len(ids)} case(s): "
                  + ", ".join(md_code(i, in_table=False) for i in ids) + "):", "",
                  "| node | op | ONNX type | TensorRT type | |", "|---|---|---|---|---|"]
        lines += [f"| {md_code(r.node, in_table=True)} | {r.op} | {r.onnx} | {r.tensorrt or '–'} | {plan_mark(r)} |"
                  for r in build.nodes]
    return lines


def render_markdown(report: Report, *, extra: Sequence[str] = ()) -> str:
    """The whole ``report.md``; ``extra`` sections (e.g. the baseline comparison) follow the header."""
    prov = report.provenance
    lines = ["# castguard sweep report", "",
             f"{counts_text(report.counts())} over {len(report.models)} model(s). Created {report.created}; "
             f"castguard {prov.castguard}, onnx {prov.onnx}, onnxruntime {prov.onnxruntime}; "
             f"runners: {prov.runners_text()}; hypothesis profile: {prov.hypothesis_profile}"
             + (f"; commit {prov.git_commit[:12]}" if prov.git_commit else "") + ".", ""]
    if report.interrupted:
        lines += [f"**{completion_text(report).capitalize()}.** This report is partial: the cases that did not run "
                  "are missing, and it was not published over the previous complete report.", ""]
    lines += [shard_line(report), ""] if report.shard is not None else []
    lines += _shards_lines(report)
    lines += [section for section in extra if section]
    for model in report.models:
        lines += _model_section(model, report.cases_of(model), report.counts(model))
    lines += ["**Legend.** " + " ".join(f"*{name}*: {text}." for name, text in LEGEND), ""]
    return "\n".join(lines)


def _shards_lines(report: Report) -> list[str]:
    """A merged report's shards: how each ended and where it ran."""
    if not report.shards:
        return []
    lines = ["## Shards", "", "| " + " | ".join(SHARD_COLUMNS) + " |", "|" + "---|" * len(SHARD_COLUMNS)]
    lines += ["| " + " | ".join(md_code(cell, in_table=True) if i == len(row) - 1 else cell.replace("|", "\\|")
                                for i, cell in enumerate(row)) + " |" for row in shard_rows(report)]
    return lines + [""]


def _model_section(model: str, cases: tuple[CaseRecord, ...], counts: dict[str, int]) -> list[str]:
    inputs = sorted({c.inputs_id for c in cases})
    multi = len(inputs) > 1
    meta = (f"model sha256 {md_code(cases[0].model_sha256[:16], in_table=False)}, inputs "
            + ", ".join(md_code(i, in_table=False) for i in inputs))
    best = best_passing(cases)
    if best is not None:
        meta += (f"; best passing case: {md_code(best.case_id, in_table=False)} ({fmt_share(best.lowp_flop_share)}"
                 f" low-precision FLOPs, worst error {fmt_error(best.worst_error)}"
                 + (f", {best.speedup:.2f}× FP32 speed" if best.speedup is not None else "") + ")")
    trt = any(c.trt_build is not None for c in cases)
    header = _HEADER.replace(" first divergent tensor |\n", " first divergent tensor | TensorRT |\n") + "---|" \
        if trt else _HEADER
    lines = [f"## {md_code(model, in_table=False)}: {counts_text(counts)}", "", meta, "", header]
    for case in display_sorted(cases):
        status = case.status.upper() if case.status in ("fail", "error", "xpass") else case.status
        divergent = "–" if case.first_divergent is None else md_code(fmt_divergence(case), in_table=True)
        same = same_model_as(case)
        label = md_code(case_label(case, with_inputs=multi), in_table=True) + (
            f" (same model as {md_code(same, in_table=True)})" if same else "")
        lines.append(f"| {label} | {status} | "
                     f"{md_code(case.runner or '–', in_table=True)} | {fmt_error(case.worst_error)} | "
                     f"{fmt_error(case.worst_max_rel)} | "
                     f"{fmt_share(case.lowp_flop_share)} | {fmt_int(case.cast_count)} | {divergent} |"
                     + (f" {trt_cell(case)} |" if trt else ""))
    failing = [c for c in display_sorted(cases) if c.status in ("fail", "error", "xpass") and c.message]
    if failing:
        lines += ["", "Failures:", ""]
        lines += [f"- {md_code(case_label(c, with_inputs=multi), in_table=False)}: "
                  f"{md_code(first_line(c.message), in_table=False)}" for c in failing]
    tuned = tuned_plan_lines(cases)
    if tuned:
        lines += ["", "Tuned plans (castguard tune: the fewest FP32 nodes within the max-error bound; the nodes the "
                  "magnitude rules keep FP32 are not listed):", ""]
        for case, head, kept in tuned:
            lines.append(f"- {md_code(case_label(case, with_inputs=multi), in_table=False)}: {head}")
            lines += [f"  - {md_code(node, in_table=False)}: {why or 'kept'}" for node, why in kept]
    lines += _speed_lines(cases, multi=multi) + _trt_lines(cases)
    notes = grouped_notes(cases)
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {note} (" + ("every case" if len(ids) == len(cases) else f"{len(ids)} case(s): " + ", ".join(
            md_code(i, in_table=False) for i in ids)) + ")" for note, ids in notes]
    return lines + [""]
