"""``report.html``'s case sections: the case table, the failure cards (message, cause, diagnosis, per-output table),
the tuned plans, the TensorRT build check and the notes, with the status badges every table shows. Formatting only,
as :mod:`harness.report.render_html`, which puts them on the page."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from harness.report.diagnosis import diagnosis_html
from harness.report.format import case_label, fmt_divergence, fmt_error, fmt_int, fmt_share
from harness.report.model import CaseRecord
from harness.report.trt_view import plan_mark, trt_cell
from harness.report.view import ModelView


def bound_title(case: CaseRecord) -> str:
    """A tooltip with why the case's FLOP share is only an upper bound."""
    return "" if not case.lowp_share_bound else f' title="bound: {escape(case.lowp_share_bound)}"'


def case_table(cases: Sequence[CaseRecord], *, multi: bool) -> str:
    trt = any(c.trt_build is not None for c in cases)
    rows = "".join(
        f'<tr><td><code class="id">{escape(case_label(c, with_inputs=multi))}</code>{same_note(c)}</td>'
        f"<td>{status_badge(c.status)}</td>"
        f'<td>{escape(c.runner or "–")}</td><td class="num">{fmt_error(c.worst_error)}</td>'
        f'<td class="num">{fmt_error(c.worst_max_rel)}</td>'
        f'<td class="num"{bound_title(c)}>{fmt_share(c.lowp_flop_share, c.lowp_share_bound)}</td><td class="num">{fmt_int(c.cast_count)}</td>'
        f'<td class="num">{c.timings.total_s:.2f}</td><td>{escape(fmt_divergence(c))}</td>'
        + (f"<td>{escape(trt_cell(c))}</td>" if trt else "")
        + "</tr>"
        for c in cases
    )
    return (
        "<table><tr><th>case</th><th>status</th><th>runner</th><th>worst error</th><th>worst max_rel</th>"
        "<th>lowp FLOP share</th>"
        f"<th>casts</th><th>time (s)</th><th>first divergent tensor</th>{'<th>TensorRT</th>' if trt else ''}"
        f"</tr>{rows}</table>"
    )


def trt_section(view: ModelView) -> str:
    """The TensorRT build check: what did not build, and each distinct model's types per ONNX node (ONNX plan
    next to TensorRT's tensors), folded."""
    head = view.trt_headline
    if head is None:
        return ""
    items = "".join(
        f"<li><pre>{escape(said)}</pre>" + ", ".join(f'<code class="id">{escape(c)}</code>' for c in labels) + "</li>"
        for said, labels in view.trt_findings
    )
    tables = []
    for ids, build in view.trt_tables:
        rows = "".join(
            f"<tr><td><code>{escape(r.node)}</code></td><td>{escape(r.op)}</td><td>{escape(r.onnx)}</td>"
            f"<td>{escape(r.tensorrt or '–')}</td><td>{plan_mark(r)}</td></tr>"
            for r in build.nodes
        )
        tables.append(
            f"<details><summary>Types per ONNX node, converted model vs {escape(build.backend)} "
            f"({len(ids)} case(s): "
            + ", ".join(f'<code class="id">{escape(i)}</code>' for i in ids)
            + ")</summary><table><tr><th>node</th><th>op</th><th>ONNX type</th><th>TensorRT type</th><th></th>"
            f"</tr>{rows}</table></details>"
        )
    return (
        f"<h3>TensorRT build check</h3><p>{escape(head)}.</p>"
        + (f"<ul>{items}</ul>" if items else "")
        + "".join(tables)
    )


def failures(view: ModelView) -> str:
    groups, multi = view.failure_groups, view.multi_inputs
    if not groups:
        return ""
    blocks = []
    for case, *same in groups:
        block = [
            f'<div class="failure"><h4><code class="id">{escape(case_label(case, with_inputs=multi))}</code> '
            f"{status_badge(case.status)}</h4>{sharing(same, multi=multi)}"
            f"<pre>{escape(case.message or '(no message)')}</pre>"
        ]
        d = case.first_divergent
        if d is not None:
            block.append(
                f"<p>Cause: <code>{escape(d.tensor)}</code> from node "
                f"<code>{escape(d.node)}</code> ({escape(d.op)}), max_abs {fmt_error(d.max_abs)}, "
                f"max_rel {fmt_error(d.max_rel)}</p>"
            )
        if case.diagnosis is not None:
            block.append(diagnosis_html(case.diagnosis))
        if case.outputs:
            block.append(output_table(case))
        blocks.append("".join(block) + "</div>")
    return "<h3>Failing cases (and expected failures)</h3>" + "".join(blocks)


def sharing(same: Sequence[CaseRecord], *, multi: bool) -> str:
    """The cases that converted to the same model as a failure card's case, and so share its result."""
    if not same:
        return ""
    return f"<p>Same converted model, same result (not run again): {case_badges(same, multi=multi, sep=', ')}</p>"


def output_table(case: CaseRecord) -> str:
    rows = "".join(
        f"<tr><td><code>{escape(o.name)}</code></td><td>{'ok' if o.passed else 'FAIL'}</td>"
        f'<td class="num">{fmt_error(o.max_abs)}</td><td class="num">{fmt_error(o.max_rel)}</td>'
        f'<td class="num">{o.n_over}/{o.n_total}</td><td>atol {o.atol:.3g}, rtol {o.rtol:.3g}, {escape(o.mode)}</td>'
        f"<td>atol {fmt_error(o.required_atol)} or rtol {fmt_error(o.required_rtol)}</td></tr>"
        for o in case.outputs
    )
    return (
        "<table><tr><th>output</th><th></th><th>max_abs</th><th>max_rel</th><th>over</th><th>tolerance</th>"
        f"<th>would pass with</th></tr>{rows}</table>"
    )


def case_badges(cases: Sequence[CaseRecord], *, multi: bool, sep: str) -> str:
    """Case ids with their status, joined by ``sep`` (a Pareto point's cases one per line, the cases sharing a
    failure's converted model in a row)."""
    return sep.join(
        f'<code class="id">{escape(case_label(c, with_inputs=multi))}</code> {status_badge(c.status)}' for c in cases
    )


def tuned(view: ModelView) -> str:
    tuned, multi = view.tuned, view.multi_inputs
    if not tuned:
        return ""
    items = "".join(
        f"<li><code>{escape(case_label(case, with_inputs=multi))}</code>: {escape(head)}<ul>"
        + "".join(f"<li><code>{escape(node)}</code>: {escape(why or 'kept')}</li>" for node, why in kept)
        + "</ul></li>"
        for case, head, kept in tuned
    )
    return (
        "<h3>Tuned plans</h3><p>castguard tune: the fewest FP32 nodes within the max-error bound (the star on the "
        "plot); nodes the magnitude rules keep FP32 are not listed.</p><ul>" + items + "</ul>"
    )


def notes(view: ModelView) -> str:
    notes, cases = view.notes, view.cases
    if not notes:
        return ""
    return (
        "<h3>Notes</h3><ul>"
        + "".join(
            f"<li>{escape(note)} ("
            + (
                "every case"
                if len(ids) == len(cases)
                else (f"{len(ids)} case(s): " + ", ".join(f'<code class="id">{escape(i)}</code>' for i in ids))
            )
            + ")</li>"
            for note, ids in notes
        )
        + "</ul>"
    )


def same_note(case: CaseRecord) -> str:
    """Under a reused case's id: the case whose converted model (and so result) it shares."""
    same = case.reused_from
    return (
        ""
        if same is None
        else (f'<br><small>same model as <code class="id">{escape(same)}</code> (not run again)</small>')
    )


def status_badge(status: str) -> str:
    """A status word in its colour (the page's ``st-*`` classes)."""
    return f'<span class="st st-{escape(status)}">{escape(status)}</span>'
