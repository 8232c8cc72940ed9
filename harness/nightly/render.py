"""The baseline comparison as markdown, HTML and terminal lines. Formatting only: the verdict is
:mod:`harness.nightly.rules`'s; this module never decides what regressed."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape

from harness.nightly.comparison import TRT_BUILDS, Change, Comparison
from harness.nightly.history import Skipped
from harness.nightly.rules import GOOD_STATUSES, Key, describe_rules
from harness.report.format import fmt_error, fmt_share
from harness.report.render_md import md_code

_COLUMNS = ("case", "metric", "baseline", "now", "change", "rule", "since")
_LIST_LIMIT = 20


def fmt_value(metric: str, value: float | str) -> str:
    """A metric's value as the report shows it (shares in %, times in s, errors in 3 digits)."""
    if isinstance(value, str):
        return value
    if metric == "lowp_share":
        return fmt_share(value)
    if metric.endswith("_time"):
        return f"{value:.2f} s"
    if metric == "casts":
        return str(int(value))
    return fmt_error(value)


def fmt_change(change: Change) -> str:
    """``+38.2%``, ``-3.0pp``, ``+0.012``; ``worse``/``better`` for a status; ``+inf`` once non-finite."""
    if change.delta is None and change.rule.metric == "trt_build":
        return "worse" if change.baseline == TRT_BUILDS else "better"
    if change.delta is None:
        return "worse" if change.baseline in GOOD_STATUSES else "better"
    if math.isinf(change.delta):
        return "+inf" if change.delta > 0 else "-inf"
    if change.rule.unit in ("%", "pp"):
        return f"{100 * change.delta:+.1f}{change.rule.unit}"
    return f"{change.delta:+.3g}"


def _cells(change: Change, *, with_inputs: bool) -> tuple[str, ...]:
    return (
        _key_text(change.key, with_inputs=with_inputs),
        change.rule.metric,
        fmt_value(change.rule.metric, change.baseline),
        fmt_value(change.rule.metric, change.now),
        fmt_change(change),
        change.rule.text,
        change.since or "this run",
    )


def _key_text(key: Key, *, with_inputs: bool) -> str:
    model, case_id, inputs_id = key
    return f"{model} / {case_id}" + (f" [{inputs_id}]" if with_inputs and inputs_id else "")


def _with_inputs(comparison: Comparison) -> bool:
    """Name the input set only when some model appears with several (as the report's case tables do)."""
    keys = [c.key for c in (*comparison.regressions, *comparison.improvements)]
    keys += [*comparison.new, *comparison.missing, *comparison.model_changed]
    inputs: dict[str, set[str]] = {}
    for model, _, inputs_id in keys:
        inputs.setdefault(model, set()).add(inputs_id)
    return any(len(ids) > 1 for ids in inputs.values())


def headline(comparison: Comparison) -> str:
    if comparison.nothing_comparable:
        return (
            f"nothing comparable: none of this run's {len(comparison.new)} case(s) matches one of the "
            f"{len(comparison.missing)} case(s) of the baseline of {comparison.baseline_created} (a changed "
            "setting renames cases: model, case id and inputs id must all match); nothing was judged"
        )
    return (
        f"{len(comparison.regressions)} regression(s), {len(comparison.improvements)} improvement(s) over "
        f"{comparison.compared} case(s) compared with the baseline of {comparison.baseline_created}"
        + (f" (commit {comparison.baseline_commit[:12]})" if comparison.baseline_commit else "")
        + f"; rules: {describe_rules(comparison.rules)}"
    )


def _lists(comparison: Comparison) -> list[tuple[str, tuple[Key, ...]]]:
    return [
        (title, keys)
        for title, keys in (
            ("New cases (not in the baseline)", comparison.new),
            ("Missing cases (in the baseline, not in this run)", comparison.missing),
            (
                "Model changed since the baseline (another sha256: not compared; the next clean run becomes the "
                "baseline)",
                comparison.model_changed,
            ),
        )
        if keys
    ]


def _partial_note(comparison: Comparison) -> str:
    if not comparison.partial:
        return ""
    return (
        f": this run lacks {len(comparison.missing)} of the baseline's cases, so it will not become the baseline "
        "(later runs keep the complete one) unless you accept its smaller case set (castguard history DIR --accept)"
    )


def _shown(keys: Sequence[Key], *, with_inputs: bool) -> tuple[list[str], str]:
    more = f" … and {len(keys) - _LIST_LIMIT} more" if len(keys) > _LIST_LIMIT else ""
    return [_key_text(k, with_inputs=with_inputs) for k in keys[:_LIST_LIMIT]], more


def notes_markdown(notes: Sequence[str], skipped: Sequence[Skipped]) -> str:
    """Where the baseline came from (or why there is none) and the skipped history files."""
    lines = [f"- {note}" for note in notes]
    lines += [f"- skipped unreadable history file {md_code(s.path.name, in_table=False)}: {s.reason}" for s in skipped]
    if skipped:
        lines.insert(0, f"- history: {len(skipped)} unreadable file(s) skipped")
    return "\n".join(["## Nightly", "", *lines, ""]) if lines else ""


def notes_html(notes: Sequence[str], skipped: Sequence[Skipped]) -> str:
    items = [escape(note) for note in notes]
    if skipped:
        items.append(
            f"history: {len(skipped)} unreadable file(s) skipped: "
            + "; ".join(f"<code>{escape(s.path.name)}</code> ({escape(s.reason)})" for s in skipped)
        )
    return (
        ('<section id="nightly"><h2>Nightly</h2><ul>' + "".join(f"<li>{i}</li>" for i in items) + "</ul></section>")
        if items
        else ""
    )


def comparison_markdown(comparison: Comparison) -> str:
    """The "Baseline comparison" section of ``report.md``."""
    source, multi = md_code(comparison.baseline_source, in_table=False), _with_inputs(comparison)
    lines = [
        "## Baseline comparison",
        "",
        f"{headline(comparison)}. Baseline: {source}.",
        "",
        f"{comparison.coverage}{_partial_note(comparison)}.",
        "",
    ]
    for title, changes in (("Regressions", comparison.regressions), ("Improvements", comparison.improvements)):
        if not changes:
            continue
        lines += [f"### {title}", "", "| " + " | ".join(_COLUMNS) + " |", "|---|---|---:|---:|---:|---|---|"]
        lines += [
            "| "
            + " | ".join(
                md_code(c, in_table=True) if i in (0, 5) else c.replace("|", "\\|")
                for i, c in enumerate(_cells(change, with_inputs=multi))
            )
            + " |"
            for change in changes
        ]
        lines.append("")
    for title, keys in _lists(comparison):
        shown, more = _shown(keys, with_inputs=_with_inputs(comparison))
        lines += [f"**{title}:** " + ", ".join(md_code(k, in_table=False) for k in shown) + more, ""]
    return "\n".join(lines)


def comparison_html(comparison: Comparison) -> str:
    """The "Baseline comparison" section of ``report.html``."""
    multi = _with_inputs(comparison)
    parts = [
        f'<section id="baseline"><h2>Baseline comparison</h2><p class="meta">{escape(headline(comparison))}.'
        f" Baseline: <code>{escape(comparison.baseline_source)}</code>.</p>"
        f'<p class="meta">{escape(comparison.coverage + _partial_note(comparison))}.</p>'
    ]
    for title, changes in (("Regressions", comparison.regressions), ("Improvements", comparison.improvements)):
        if changes:
            head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
            rows = "".join(
                "<tr>" + "".join(_td(i, cell) for i, cell in enumerate(_cells(ch, with_inputs=multi))) + "</tr>"
                for ch in changes
            )
            parts.append(f"<h3>{title}</h3><table><tr>{head}</tr>{rows}</table>")
    for title, keys in _lists(comparison):
        shown, more = _shown(keys, with_inputs=_with_inputs(comparison))
        parts.append(
            f"<p><b>{escape(title)}:</b> "
            + ", ".join(f'<code class="id">{escape(k)}</code>' for k in shown)
            + escape(more)
            + "</p>"
        )
    return "".join(parts) + "</section>"


def _td(index: int, cell: str) -> str:
    if index == 0:
        return f'<td><code class="id">{escape(cell)}</code></td>'
    return f'<td class="num">{escape(cell)}</td>' if index in (2, 3, 4) else f"<td>{escape(cell)}</td>"


def comparison_lines(comparison: Comparison, *, limit: int = _LIST_LIMIT) -> list[str]:
    """Terminal lines: the headline, then each regression (and improvement) on one line."""
    lines = [headline(comparison), f"  {comparison.coverage}" + _partial_note(comparison)]
    for title, changes in (("REGRESSION", comparison.regressions), ("improvement", comparison.improvements)):
        for change in changes[:limit]:
            case, metric, before, now, delta, rule, since = _cells(change, with_inputs=_with_inputs(comparison))
            lines.append(f"  {title} {case}: {metric} {before} -> {now} ({delta}; rule {rule}; since {since})")
        if len(changes) > limit:
            lines.append(f"  … and {len(changes) - limit} more {title.lower()}(s): see report.md")
    for title, keys in _lists(comparison):
        lines.append(f"  {title}: {len(keys)}")
    return lines


def skipped_lines(skipped: Iterable[Skipped]) -> list[str]:
    return [f"  skipped unreadable history file {s.path}: {s.reason}" for s in skipped]
