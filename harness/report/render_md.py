"""``report.md``: tables readable in a CI log and in a GitHub step summary. Formatting only: it renders the
report's :class:`~harness.report.view.ReportView` and computes nothing of its own.

Names from models (tensors, messages) are put in code spans with table pipes escaped, so markdown
and HTML in them are shown, never interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.report.diagnosis import diagnosis_md
from harness.report.format import (
    LEGEND,
    SHARD_COLUMNS,
    case_label,
    completion_text,
    counts_text,
    fmt_divergence,
    fmt_error,
    fmt_int,
    fmt_share,
    shard_line,
    shard_rows,
)
from harness.report.model import Report
from harness.report.trt_view import plan_mark, trt_cell
from harness.report.view import ModelView, ReportView

_HEADER = (
    "| case | status | runner | worst error | worst max_rel | lowp FLOP share | casts | first divergent tensor |\n"
    "|---|---|---|---:|---:|---:|---:|---|"
)


def md_code(text: str, *, in_table: bool) -> str:
    """``text`` as one inline code span: newlines become spaces; in table rows pipes are escaped (GFM)."""
    flat = text.replace("\r", " ").replace("\n", " ")
    flat = flat.replace("|", "\\|") if in_table else flat
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _logits_lines(view: ModelView) -> list[str]:
    """Outputs judged as logits (harness.judge.vocab): top-1 token agreement and mean KL per case."""
    rows = [
        f"| {md_code(case_label(c, with_inputs=view.multi_inputs), in_table=True)} | {c.status} | "
        f"{md_code(name, in_table=True)} | {top1:.4f} | {kl:.3g} |"
        for c, name, top1, kl in view.logits
    ]
    if not rows:
        return []
    head = [
        "",
        "Logits (last axis a vocabulary): top-1 token agreement with the golden, and the mean "
        "KL(softmax(golden) || softmax(obtained)) per position, nats:",
        "",
        "| case | status | output | top-1 agreement | mean KL |",
        "|---|---|---|---:|---:|",
    ]
    return head + rows


def _speed_lines(view: ModelView) -> list[str]:
    """The measured speed (GPU runners) as a table, or why the cases claim none."""
    rows, multi = view.speed_rows, view.multi_inputs
    lines: list[str] = []
    if rows:
        lines += [
            "",
            "Speed (measured; latency, FP32 and speedup are device-resident: inputs bound on the device once, "
            "outputs left there (IO binding); end to end: numpy in and out, host copies included; front = Pareto "
            "front of the device-resident speedup vs error among passing cases):",
            "",
            "| case | status | latency ms | FP32 ms | speedup | end to end ms (FP32), speedup | worst error | |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        lines += [
            f"| {md_code(case_label(c, with_inputs=multi), in_table=True)} | {c.status} | {ms} | {fp32} | {up} | "
            f"{e2e} | {err} | {'front' if front else ''} |"
            for c, ms, fp32, up, err, front, e2e in rows
        ]
    for note in view.speed_notes:
        lines += ["", f"No speed claimed: {note}."]
    return lines


def _trt_lines(view: ModelView) -> list[str]:
    """The TensorRT build check: what did not build, and per-node types (ONNX plan next to TensorRT) of small models."""
    head = view.trt_headline
    if head is None:
        return []
    lines = ["", f"{head}."]
    lines += (
        [
            "",
            *(
                f"- {md_code(said, in_table=False)} ({', '.join(md_code(c, in_table=False) for c in labels)})"
                for said, labels in view.trt_findings
            ),
        ]
        if view.trt_findings
        else []
    )
    for ids, build in view.trt_tables_md:
        lines += [
            "",
            f"Types per ONNX node, converted model vs {build.backend} ({len(ids)} case(s): "
            + ", ".join(md_code(i, in_table=False) for i in ids)
            + "):",
            "",
            "| node | op | ONNX type | TensorRT type | |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {md_code(r.node, in_table=True)} | {r.op} | {r.onnx} | {r.tensorrt or '–'} | {plan_mark(r)} |"
            for r in build.nodes
        ]
    return lines


def render_markdown(view: ReportView, *, extra: Sequence[str] = ()) -> str:
    """The whole ``report.md``; ``extra`` sections (e.g. the baseline comparison) follow the header."""
    report = view.report
    prov = report.provenance
    lines = [
        "# castguard sweep report",
        "",
        f"{counts_text(report.counts())} over {len(report.models)} model(s). Created {report.created}; "
        f"castguard {prov.castguard}, onnx {prov.onnx}, onnxruntime {prov.onnxruntime}; "
        f"runners: {prov.runners_text()}; hypothesis profile: {prov.hypothesis_profile}"
        + (f"; commit {prov.git_commit[:12]}" if prov.git_commit else "")
        + ".",
        "",
    ]
    if report.interrupted:
        lines += [
            f"**{completion_text(report).capitalize()}.** This report is partial: the cases that did not run "
            "are missing, and it was not published over the previous complete report.",
            "",
        ]
    lines += [shard_line(report), ""] if report.shard is not None else []
    lines += _shards_lines(report)
    lines += [section for section in extra if section]
    for model in view.models:
        lines += _model_section(model)
    lines += ["**Legend.** " + " ".join(f"*{name}*: {text}." for name, text in LEGEND), ""]
    return "\n".join(lines)


def _shards_lines(report: Report) -> list[str]:
    """A merged report's shards: how each ended and where it ran."""
    if not report.shards:
        return []
    lines = ["## Shards", "", "| " + " | ".join(SHARD_COLUMNS) + " |", "|" + "---|" * len(SHARD_COLUMNS)]
    lines += [
        "| "
        + " | ".join(
            md_code(cell, in_table=True) if i == len(row) - 1 else cell.replace("|", "\\|")
            for i, cell in enumerate(row)
        )
        + " |"
        for row in shard_rows(report)
    ]
    return lines + [""]


def _converter_lines(view: ModelView) -> list[str]:
    if not view.converters:
        return []
    lines = [
        "",
        "Converters side by side (each converter's best case; share read from the converted graph's types):",
        "",
        "| converter | cases | best case | status | worst error | low-precision FLOPs | speed vs FP32 | settings taken |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in view.converters:
        c = row.case
        status = c.status if row.judged or c.status not in ("skip",) else f"{c.status} ({row.why})"
        lines.append(
            f"| {md_code(row.converter, in_table=True)} | {row.cases} | {md_code(c.case_id, in_table=True)} | "
            f"{md_code(status, in_table=True)} | {fmt_error(c.worst_error)}{'' if row.judged else ' (not judged)'} | "
            f"{fmt_share(c.lowp_flop_share, c.lowp_share_bound)} | "
            f"{f'{c.speedup:.2f}×' if c.speedup is not None else '–'} | {', '.join(row.settings) or 'none'} |"
        )
    return lines


def _model_section(view: ModelView) -> list[str]:
    cases, multi = view.cases, view.multi_inputs
    meta = f"model sha256 {md_code(cases[0].model_sha256[:16], in_table=False)}, inputs " + ", ".join(
        md_code(i, in_table=False) for i in view.inputs
    )
    best = view.best
    if best is not None:
        meta += (
            f"; best passing case: {md_code(best.case_id, in_table=False)} ({fmt_share(best.lowp_flop_share, best.lowp_share_bound)}"
            f" low-precision FLOPs, worst error {fmt_error(best.worst_error)}"
            + (f", {best.speedup:.2f}× FP32 speed" if best.speedup is not None else "")
            + ")"
        )
    trt = view.build_checked
    header = (
        _HEADER.replace(" first divergent tensor |\n", " first divergent tensor | TensorRT |\n") + "---|"
        if trt
        else _HEADER
    )
    lines = [f"## {md_code(view.name, in_table=False)}: {counts_text(view.counts)}", "", meta, "", header]
    for case in cases:
        status = case.status.upper() if case.status in ("fail", "error", "xpass") else case.status
        divergent = "–" if case.first_divergent is None else md_code(fmt_divergence(case), in_table=True)
        same = case.reused_from
        label = md_code(case_label(case, with_inputs=multi), in_table=True) + (
            f" (same model as {md_code(same, in_table=True)})" if same else ""
        )
        lines.append(
            f"| {label} | {status} | "
            f"{md_code(case.runner or '–', in_table=True)} | {fmt_error(case.worst_error)} | "
            f"{fmt_error(case.worst_max_rel)} | "
            f"{fmt_share(case.lowp_flop_share, case.lowp_share_bound)} | {fmt_int(case.cast_count)} | {divergent} |"
            + (f" {trt_cell(case)} |" if trt else "")
        )
    failing = [g for g in view.failure_groups if g[0].status in ("fail", "error", "xpass") and g[0].message]
    if failing:
        lines += ["", "Failures (one per distinct result; the whole message):", ""]
        for c, *sharing in failing:
            shared = (
                " (same converted model, same result: "
                + ", ".join(md_code(case_label(other, with_inputs=multi), in_table=False) for other in sharing)
                + ")"
                if sharing
                else ""
            )
            lines.append(f"- {md_code(case_label(c, with_inputs=multi), in_table=False)}{shared}:")
            lines += ["", "  ```text", *(f"  {line}" for line in c.message.rstrip().splitlines()), "  ```", ""]
            lines += [f"  - {md_code(line.strip(), in_table=False)}" for line in diagnosis_md(c.diagnosis)]
    if view.tuned:
        lines += [
            "",
            "Tuned plans (castguard tune: the fewest FP32 nodes within the max-error bound; the nodes the "
            "magnitude rules keep FP32 are not listed):",
            "",
        ]
        for case, head, kept in view.tuned:
            lines.append(f"- {md_code(case_label(case, with_inputs=multi), in_table=False)}: {head}")
            lines += [f"  - {md_code(node, in_table=False)}: {why or 'kept'}" for node, why in kept]
    lines += _converter_lines(view) + _logits_lines(view) + _speed_lines(view) + _trt_lines(view)
    if view.notes:
        lines += ["", "Notes:", ""]
        lines += [
            f"- {note} ("
            + (
                "every case"
                if len(ids) == len(cases)
                else f"{len(ids)} case(s): " + ", ".join(md_code(i, in_table=False) for i in ids)
            )
            + ")"
            for note, ids in view.notes
        ]
    return lines + [""]
