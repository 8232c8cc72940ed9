"""``report.html``: one self-contained page (inline CSS, plots as base64 PNG data URIs). Formatting only: it renders
the report's :class:`~harness.report.view.ReportView` (and draws its plots) and computes nothing of its own.

Every piece of text from a model or a message goes through :func:`html.escape`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape

from harness.report.format import (
    LEGEND,
    SHARD_COLUMNS,
    case_label,
    completion_text,
    counts_text,
    fmt_error,
    fmt_share,
    shard_line,
    shard_rows,
)
from harness.report.html_cases import case_badges, case_table, failures, notes, status_badge, trt_section, tuned
from harness.report.model import STATUSES, Report
from harness.report.plotcache import PlotCache
from harness.report.plotdata import grid_spec, share_spec, speed_spec
from harness.report.view import ModelView, ReportView

MIN_PLOTTED = 2
"""Cases a model needs for its plots: they compare cases (one point says nothing the tables do not)."""
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;margin:0;background:#f6f7f9}
main{max-width:1360px;margin:0 auto;padding:20px 28px 40px}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.meta{color:#57606a;margin:0 0 12px}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:4px 18px 14px;margin:16px 0}
table{border-collapse:collapse;margin:6px 0;font-size:13px}th,td{border:1px solid #d8dee4;padding:3px 8px;text-align:left}
th{background:#f0f3f6}td.num{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even) td{background:#fafbfc}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}code.id{white-space:nowrap;word-break:normal}
.st{font-weight:600;border-radius:10px;padding:0 7px;white-space:nowrap}
.st-pass{background:#dafbe1;color:#116329}.st-fail,.st-error{background:#ffebe9;color:#a40e26}
.st-xfail{background:#fff8c5;color:#7d4e00}.st-xpass{background:#ffd8b5;color:#8a3b00}.st-skip{background:#eaeef2;color:#57606a}
.plots{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}figure{margin:6px 0;display:table}
figure img{max-width:100%;border:1px solid #d8dee4;border-radius:4px}
figcaption{display:table-caption;caption-side:bottom;color:#57606a;font-size:12px;padding-top:4px}
.failure{border-left:4px solid #cf222e;padding:2px 12px;margin:10px 0;background:#fffafa}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:8px;border-radius:4px;font-size:12px;margin:4px 0}
.legend dt{font-weight:600;float:left;clear:left;width:150px}.legend dd{margin:0 0 4px 160px}
"""


def render_html(view: ReportView, *, extra: Sequence[str] = (), plots: PlotCache | None = None) -> str:
    """The whole ``report.html``; ``extra`` sections (e.g. the baseline comparison, trends) follow the summary.
    ``plots``: where the plots' PNGs are cached (None: drawn now, :mod:`harness.report.plotcache`)."""
    plots = plots or PlotCache(None)
    report = view.report
    prov = report.provenance
    body = [
        f'<h1>castguard sweep report</h1><p class="meta">{escape(counts_text(report.counts()))} over '
        f"{len(report.models)} model(s) &middot; created {escape(report.created)} &middot; "
        f"runners {escape(prov.runners_text())}</p>",
        *_interrupted(report),
        *_shards(report),
        _summary(view),
        *extra,
    ]
    body += [_model_section(index, model, plots) for index, model in enumerate(view.models)]
    body.append(_provenance(report))
    body.append(
        '<section><h2>Legend</h2><dl class="legend">'
        + "".join(f"<dt>{escape(name)}</dt><dd>{escape(text)}</dd>" for name, text in LEGEND)
        + "</dl></section>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>castguard sweep report</title><style>{_CSS}</style></head>\n<body><main>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )


def _interrupted(report: Report) -> list[str]:
    if not report.interrupted:
        return []
    return [
        f'<p class="failure"><strong>{escape(completion_text(report).capitalize())}.</strong> This report is '
        "partial: the cases that did not run are missing, and it was not published over the previous complete "
        "report.</p>"
    ]


def _shards(report: Report) -> list[str]:
    """A shard's part of the sweep, or a merged report's shards (how each ended, where it ran)."""
    if report.shard is not None:
        return [f'<p class="meta">{escape(shard_line(report))}</p>']
    if not report.shards:
        return []
    head = "".join(f"<th>{escape(c)}</th>" for c in SHARD_COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in shard_rows(report))
    return [f'<section id="shards"><h2>Shards</h2><table><tr>{head}</tr>{rows}</table></section>']


def _summary(view: ReportView) -> str:
    head = "".join(
        f"<th>{s}</th>"
        for s in ("model", "cases", *STATUSES, "best passing case (fastest measured, else largest lowp share)")
    )
    rows = []
    for index, model in enumerate(view.models):
        counts, cases, best = model.counts, model.cases, model.best
        best_text = (
            "none"
            if best is None
            else (
                f'<code class="id">{escape(best.case_id)}</code> '
                f"({fmt_share(best.lowp_flop_share, best.lowp_share_bound)}, {fmt_error(best.worst_error)})"
            )
        )
        rows.append(
            f'<tr><td><a href="#model-{index}">{escape(model.name)}</a></td><td class="num">{len(cases)}</td>'
            + "".join(f'<td class="num">{counts[s] or ""}</td>' for s in STATUSES)
            + f"<td>{best_text}</td></tr>"
        )
    return f"<section><h2>Summary</h2><table><tr>{head}</tr>{''.join(rows)}</table></section>"


def _provenance(report: Report) -> str:
    prov = report.provenance
    items = [
        ("castguard", prov.castguard),
        ("onnx", prov.onnx),
        ("onnxruntime", prov.onnxruntime),
        ("numpy", prov.numpy),
        ("TensorRT", prov.tensorrt or "not installed"),
        ("python", prov.python),
        ("platform", prov.platform),
        ("hostname", prov.hostname),
        ("hypothesis profile", prov.hypothesis_profile),
        ("runners", prov.runners_text()),
        ("GPU", prov.gpu or "none"),
        ("git commit", prov.git_commit or "none"),
        ("schema version", str(report.schema_version)),
    ]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in items)
    return f"<section><h2>Provenance</h2><table>{rows}</table></section>"


def _model_section(index: int, view: ModelView, plots: PlotCache) -> str:
    model, cases, inputs, multi = view.name, view.cases, view.inputs, view.multi_inputs
    parts = [
        f'<section id="model-{index}"><h2>{escape(model)}</h2>',
        f'<p class="meta">{escape(counts_text(view.counts))} &middot; sha256 '
        f"<code>{escape(cases[0].model_sha256[:16])}</code> &middot; inputs "
        + ", ".join(f"<code>{escape(i)}</code>" for i in inputs)
        + "</p>",
        _plots(view, plots),
        _front_table(view),
        _converters_table(view),
        _speed_section(view, plots),
        _logits_table(view),
        "<h3>Cases (failing first)</h3>" + case_table(cases, multi=multi),
        failures(view),
        tuned(view),
        trt_section(view),
        notes(view),
        "</section>",
    ]
    return "\n".join(parts)


def _plots(view: ModelView, plots: PlotCache) -> str:
    """The model's two plots; a model of one case gets none (a chart of one point: the tables say it all), so
    that a case at deploy shapes pays for no plotting."""
    model, cases = view.name, view.cases
    if len(cases) < MIN_PLOTTED:
        return f"<p>No plots: they compare cases, and {escape(model)} has one here (its figures are below).</p>"
    plot1 = _img(
        plots.png(share_spec(cases, title=f"{model}: error vs low-precision FLOP share")),
        alt=f"error vs low-precision FLOP share for {model}",
    )
    plot2 = _img(
        plots.png(grid_spec(cases, title=f"{model}: pass/fail by data_max")),
        alt=f"pass/fail by data_max per precision for {model}",
    )
    return (
        '<div class="plots"><figure>' + plot1 + "<figcaption>One point per case: colour = precision, marker ="
        " status. Ringed and numbered: the Pareto front of the passing cases (no other passing case has a larger"
        " low-precision share at an error that is no larger), listed below; failing cases are drawn, never"
        " numbered. Cases without a share or an error (error, skip) are not"
        " drawn.</figcaption></figure><figure>"
        + plot2
        + "<figcaption>Cases whose comparison passed, per precision and data_max (error/skip cases are"
        " counted apart).</figcaption></figure></div>"
    )


def _logits_table(view: ModelView) -> str:
    """Outputs judged as logits (:mod:`harness.judge.vocab`): top-1 token agreement and mean KL per case."""
    rows = "".join(
        f'<tr><td><code class="id">{escape(case_label(c, with_inputs=view.multi_inputs))}</code></td>'
        f"<td>{status_badge(c.status)}</td><td><code>{escape(name)}</code></td>"
        f'<td class="num">{top1:.4f}</td><td class="num">{kl:.3g}</td></tr>'
        for c, name, top1, kl in view.logits
    )
    if not rows:
        return ""
    return (
        "<h3>Logits</h3><p>Outputs whose last axis is a vocabulary: top-1 token agreement with the golden, and the "
        "mean KL(softmax(golden) &#8214; softmax(obtained)) per position, in nats.</p><table><tr><th>case</th>"
        f"<th>status</th><th>output</th><th>top-1 agreement</th><th>mean KL</th></tr>{rows}</table>"
    )


def _converters_table(view: ModelView) -> str:
    """The converters side by side: one row per converter (its best case; :mod:`harness.report.converters`)."""
    if not view.converters:
        return ""
    rows = []
    for row in view.converters:
        c = row.case
        note = "" if row.judged or not c.message else f" ({escape(row.why)})"
        rows.append(
            f"<tr><td><code>{escape(row.converter)}</code></td><td>{row.cases}</td>"
            f"<td><code>{escape(c.case_id)}</code></td><td>{status_badge(c.status)}{note}</td>"
            f"<td>{fmt_error(c.worst_error)}{'' if row.judged else ' (not judged)'}</td>"
            f"<td>{fmt_share(c.lowp_flop_share, c.lowp_share_bound)}</td>"
            f"<td>{f'{c.speedup:.2f}×' if c.speedup is not None else '–'}</td>"
            f"<td>{escape(', '.join(row.settings) or 'none')}</td></tr>"
        )
    return (
        "<h3>Converters side by side</h3><p>Each converter's best case; the low-precision share is read from the "
        "converted graph's types.</p><table><tr><th>converter</th><th>cases</th><th>best case</th><th>status</th>"
        "<th>worst error</th><th>low-precision FLOPs</th><th>speed vs FP32</th><th>settings taken</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _front_table(view: ModelView) -> str:
    groups, multi = view.front, view.multi_inputs
    if not groups:
        return "<h3>Pareto front</h3><p>No passing case has both a FLOP share and an error.</p>"
    rows = "".join(
        f'<tr><td class="num">{rank}</td><td>{case_badges(group, multi=multi, sep="<br>")}</td>'
        f'<td class="num">{fmt_share(group[0].lowp_flop_share, group[0].lowp_share_bound)}</td>'
        f'<td class="num">{fmt_error(group[0].worst_error)}</td></tr>'
        for rank, group in enumerate(groups, 1)
    )
    return (
        "<h3>Pareto front</h3><table><tr><th>#</th><th>cases (identical results share a row)</th>"
        f"<th>lowp FLOP share</th><th>worst error</th></tr>{rows}</table>"
    )


def _speed_section(view: ModelView, plots: PlotCache) -> str:
    model, cases, multi, rows = view.name, view.cases, view.multi_inputs, view.speed_rows
    notes = "".join(f"<p>No speed claimed: {escape(note)}.</p>" for note in view.speed_notes)
    if not rows:
        return f"<h3>Speed</h3>{notes or '<p>No case was timed.</p>'}"
    figure = ""
    if len(rows) >= MIN_PLOTTED:
        plot = _img(
            plots.png(speed_spec(cases, title=f"{model}: error vs measured speedup")),
            alt=f"error vs measured speedup for {model}",
        )
        figure = (
            '<div class="plots"><figure>' + plot + "<figcaption>Timed cases only (GPU runners): ringed, the Pareto "
            "front of the passing cases (no other passing case is faster at an error that is no larger; "
            "device-resident speedup).</figcaption></figure></div>"
        )
    body = "".join(
        f'<tr><td><code class="id">{escape(case_label(c, with_inputs=multi))}</code> {status_badge(c.status)}</td>'
        f'<td class="num">{ms}</td><td class="num">{fp32}</td><td class="num">{up}</td>'
        f'<td class="num">{escape(e2e)}</td><td class="num">{err}</td><td>{"front" if front else ""}</td></tr>'
        for c, ms, fp32, up, err, front, e2e in rows
    )
    return (
        "<h3>Speed</h3>"
        + figure
        + "<p>Latency, FP32 and speedup are device-resident: inputs bound on the device once, outputs left "
        "there (IO binding). End to end: numpy in and out, host copies included.</p>"
        "<table><tr><th>case</th><th>latency (ms)</th><th>FP32 (ms)</th><th>speedup</th>"
        "<th>end to end (ms): latency / FP32, speedup</th><th>worst error</th>"
        f"<th></th></tr>{body}</table>{notes}"
    )


def _img(png: bytes, *, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'
