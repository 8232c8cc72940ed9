"""Trends over the last N runs of a history folder: a terminal table and per-model plots for ``report.html``.

The numbers come from :func:`harness.nightly.trend_data.trends` (max error per case family, best passing low-precision
share); this module only formats and draws them (matplotlib object API, Agg canvas, no pyplot).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from html import escape

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.nightly.trend_data import Trend, TrendRun
from harness.report.format import fmt_error, fmt_share
from harness.report.plotstyle import plain as _plain
from harness.report.plotstyle import png_bytes as _png
from harness.report.plotstyle import precision_colour, share_limits

MARKERS = ("o", "s", "^", "D")
LINES = ("-", "--", ":", "-.")


def run_label(run: TrendRun) -> str:
    """``2026-11-20 02:00 0123abc`` (date, time and short commit when known)."""
    when = run.created.replace("T", " ")[:16]
    return f"{when} {run.commit[:7]}" if run.commit else when


def trend_table_text(trends: Sequence[Trend]) -> str:
    """The terminal table of ``castguard history``: one block per model, one row per run (oldest first)."""
    blocks = []
    for trend in trends:
        marked = any(run.mark for run in trend.runs)
        head = ["run", *(["night"] if marked else []), "pass"]
        head += [f"max err {f}" for f in trend.families] + [f"best share {f}" for f in trend.families]
        rows = [
            [run_label(run), *([run.mark or "-"] if marked else []), f"{run.passed}/{run.total}"]
            + [fmt_error(e) for e in run.max_error]
            + [fmt_share(s) for s in run.best_share]
            for run in trend.runs
        ]
        widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
        lines = [
            f"{trend.model} ({len(trend.runs)} run(s))",
            "  ".join(h.ljust(w) for h, w in zip(head, widths)),
            "  ".join("-" * w for w in widths),
        ]
        lines += [
            "  ".join(
                cell.rjust(w) if i > int(marked) else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))
            )
            for row in rows
        ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) if blocks else "no runs"


def trend_png(trend: Trend) -> bytes:
    """Two panels over the runs: max error per family (log; inf drawn on a dotted line above) and best share."""
    fig = Figure(figsize=(7.0, 5.0), dpi=100)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    xs = list(range(len(trend.runs)))
    finite = [e for run in trend.runs for e in run.max_error if e is not None and math.isfinite(e) and e > 0]
    ceiling = 10.0 * max(finite, default=1e-3)
    floor = min(finite, default=1e-3) / 10.0
    for index, fam in enumerate(trend.families):
        errors = [run.max_error[index] for run in trend.runs]
        ys = [math.nan if e is None else (ceiling if not math.isfinite(e) else max(e, floor)) for e in errors]
        style = {
            "color": precision_colour(fam),
            "marker": MARKERS[index % len(MARKERS)],
            "linestyle": LINES[index % len(LINES)],
        }  # colour = precision (as in every chart), style = runner
        top.plot(xs, ys, label=fam, **style)
        shares = [run.best_share[index] for run in trend.runs]
        bottom.plot(xs, [math.nan if s is None else 100 * s for s in shares], label=fam, **style)
    top.set_yscale("log")
    if any(e is not None and not math.isfinite(e) for run in trend.runs for e in run.max_error):
        top.axhline(ceiling, color="grey", linestyle=":", linewidth=1)
        top.text(1.0, ceiling, " inf / NaN", transform=top.get_yaxis_transform(), va="center", fontsize=8)
    top.set_title(_plain(f"{trend.model}: last {len(trend.runs)} run(s)"), fontsize=11)
    top.set_ylabel("max worst error", fontsize=9)
    bottom.set_ylabel("best passing\nlowp share (%)", fontsize=9)
    known = [s for run in trend.runs for s in run.best_share if s is not None]
    if known:
        bottom.set_ylim(*share_limits(known))  # zoomed to the data, as in the report's plot
    bottom.set_xticks(xs, [run_label(run) for run in trend.runs], rotation=30, ha="right", fontsize=7)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    top.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _png(fig)


def trends_html(trends: Sequence[Trend]) -> str:
    """The "Trends" section of ``report.html``: one plot per model (nothing when there is a single run)."""
    figures = [
        f'<figure><img alt="trend for {escape(t.model)}" src="data:image/png;base64,'
        f'{base64.b64encode(trend_png(t)).decode("ascii")}"><figcaption>{escape(t.model)}: per case family '
        "(precision-runner), the largest worst error of its cases and the largest low-precision FLOP share "
        "among its passing cases, one point per run.</figcaption></figure>"
        for t in trends
        if len(t.runs) > 1
    ]
    if not figures:
        return ""
    return '<section id="trends"><h2>Trends</h2><div class="plots">' + "".join(figures) + "</div></section>"


def trends_markdown(trends: Sequence[Trend]) -> str:
    """The trend table for ``report.md`` (a fenced block, readable in a CI log and a job summary)."""
    if not any(len(t.runs) > 1 for t in trends):
        return ""
    return "## Trends\n\n```text\n" + trend_table_text([t for t in trends if len(t.runs) > 1]) + "\n```\n"
