"""A failing case's diagnosis as text (the failure message) and as a picture (report.html's divergence profile).

The facts come from :class:`harness.diagnose.Diagnosis`; nothing here decides anything.
"""

from __future__ import annotations

import math
from html import escape

from harness.diagnose.facts import Diagnosis
from harness.report.format import fmt_error


def _names(nodes: tuple[str, ...]) -> str:
    return ", ".join(repr(n) for n in nodes)


def _foreign_lines(d: Diagnosis) -> list[str]:
    """Another converter's output: what the search found or could not follow; castguard runs no fix for it."""
    lines: list[str] = []
    if d.cause is not None:
        c = d.cause
        lines.append(
            f"  cause: tensor {c.tensor!r} from node {c.node!r} ({c.op}), max_abs {fmt_error(c.max_abs)}, "
            f"max_rel {fmt_error(c.max_rel)}: the first divergence whose error reaches a failing output"
        )
    if d.problem:
        lines.append(f"  search: {d.problem}")
    elif d.cause is None:
        lines.append("  cause: on emulate no tensor beyond tolerance reaches a failing output")
    lines.append(
        f"  fix: castguard runs no fix for {d.converter}'s conversion (its fix would be castguard's own conversion); "
        "add --converter castguard to compare with a verified fix"
    )
    return lines


def diagnosis_lines(d: Diagnosis, *, precision: str, node_precisions: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """The diagnosis part of a failure message (indented lines)."""
    if d.converter != "castguard":
        return _foreign_lines(d)
    lines: list[str] = []
    absorbed = [] if d.cause is None else [r for r in d.profile if not r.passed and _before_cause(d, r.tensor)]
    if d.cause is not None:
        c = d.cause
        node = f"node {c.node!r}" if c.node else "an unnamed node"
        if c.differing is not None:
            lines.append(
                f"  cause: {c.op} {(c.port or 'output').lower()} {c.tensor!r} from {node} differ at {c.differing} "
                f"of {c.elements} positions: the first divergence whose error reaches a failing output"
            )
        else:
            lines.append(
                f"  cause: tensor {c.tensor!r} from {node} ({c.op}), max_abs {fmt_error(c.max_abs)}, "
                f"max_rel {fmt_error(c.max_rel)}: the first divergence whose error reaches a failing output"
            )
    else:
        lines.append("  cause: on emulate no tensor beyond tolerance reaches a failing output")
    if absorbed:
        shown = ", ".join(f"{r.tensor!r} ({r.op})" for r in absorbed[:3]) + (", ..." if len(absorbed) > 3 else "")
        lines.append(f"  absorbed before the outputs (not the cause): {shown}")
    if node_precisions:
        lines.append(
            "  note: this case forces node precisions ("
            + ", ".join(f"{k}:{v}" for k, v in node_precisions)
            + "); --node-precisions changes them"
        )
    if d.low_nodes == 0:
        lines.append(
            f"  fix: none to suggest: no node runs in {precision} in this case, so there is no node to keep "
            "FP32; if this error is acceptable, loosen [tool.castguard.tolerances] " + precision
        )
        return lines
    if d.verified and d.fix_ops:
        lines.append(
            f"  verified: with every {', '.join(d.fix_ops)} node in FP32 this case passes (error "
            f"{fmt_error(d.fix_error)}, share {100 * (d.fix_share or 0.0):.1f} %); the cause's node has no "
            f"name, so only its op type can select it; {d.evaluations} conversion(s) run"
        )
        lines.append(f"  fix: {d.command}")
    elif d.verified:
        lines.append(
            f"  verified: with {_names(d.fix_nodes)} in FP32 this case passes (error {fmt_error(d.fix_error)}"
            f", share {100 * (d.fix_share or 0.0):.1f} %); {d.evaluations} conversion(s) run"
        )
        lines.append(f"  fix: {d.command}")
    else:
        if d.problem:
            lines.append(f"  fix: could not be run: {d.problem}")
        lines.append(
            f"  fix: not found within {d.budget} evaluations ({d.evaluations} run"
            + ("; no named node in low precision to try" if not d.evaluations else "")
            + (
                f"; keeping {_names(d.fix_nodes)} FP32 still fails, error {fmt_error(d.fix_error)}"
                if d.fix_nodes
                else ""
            )
            + "); search further with:"
        )
        lines.append(f"  tune: {d.tune_command}")
    return lines


def _before_cause(d: Diagnosis, tensor: str) -> bool:
    """``tensor`` comes before the cause in graph order (beyond tolerance there, it is absorbed downstream)."""
    if d.cause is None:
        return False
    names = [r.tensor for r in d.profile]
    return tensor in names and d.cause.tensor in names and names.index(tensor) < names.index(d.cause.tensor)


def _level(error: float) -> float:
    """log10 of an error, clipped to [-8, 1]; inf/NaN at the top."""
    if not math.isfinite(error):
        return 1.0
    return max(-8.0, min(1.0, math.log10(error))) if error > 0 else -8.0


PROFILE_CAPTION = (
    "Each point is one tensor, in graph order; error = max|low − fp32| / max|fp32| (log scale). Red: beyond "
    "tolerance; blue: within it; grey: constant; dashed red line: the diagnosed cause; green band: nodes the "
    "verified fix keeps FP32."
)
"""The profile's legend, as HTML text under the SVG (it wraps with the page; inside the SVG it was cut off)."""


def profile_svg(d: Diagnosis, *, width: int = 640, height: int = 200) -> str:
    """The divergence profile: each tensor's error (log scale) in graph order, beyond tolerance in red,
    constants grey; the diagnosed cause and the verified fix's nodes marked. Empty when there is no profile."""
    if not d.profile:
        return ""
    left, right, top, bottom = 44, 10, 12, 28
    n = len(d.profile)

    def x(i: int) -> float:
        return left + (width - left - right) * (i + 0.5) / n

    def y(level: float) -> float:
        return top + (height - top - bottom) * (1.0 - (level + 8.0) / 9.0)

    parts = [
        (
            f'<svg class="profile" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'role="img" aria-label="divergence profile">'
        ),
        (
            f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" '
            'fill="none" stroke="#999"/>'
        ),
    ]
    for level in (-8, -6, -4, -2, 0):
        parts.append(f'<text x="{left - 4}" y="{y(level) + 4:.1f}" font-size="10" text-anchor="end">1e{level}</text>')
    fixed = set(d.fix_nodes)
    for i, r in enumerate(d.profile):
        if d.verified and r.node in fixed:
            parts.append(
                f'<rect class="fix" x="{x(i) - 3:.1f}" y="{top}" width="6" height="{height - top - bottom}" '
                f'fill="#cfe8cf"><title>kept FP32 by the verified fix: {escape(r.node)}</title></rect>'
            )
    if d.cause is not None:
        at = next((k for k, r in enumerate(d.profile) if r.tensor == d.cause.tensor), None)
        if at is not None:
            parts.append(
                f'<line class="cause" x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{top}" y2="{height - bottom}" '
                f'stroke="#c00" stroke-dasharray="3,2"/><text x="{x(at) + 3:.1f}" y="{top + 10}" '
                f'font-size="10" fill="#c00">cause: {escape(d.cause.node)}</text>'
            )
    points = []
    for i, r in enumerate(d.profile):
        colour = "#c00" if not r.passed else "#36c"
        if not r.computed:
            colour = "#aaa"
        points.append(
            f'<circle cx="{x(i):.1f}" cy="{y(_level(r.error)):.1f}" r="2.5" fill="{colour}">'
            f"<title>{escape(r.tensor)} ({escape(r.op)}): error {fmt_error(r.error)}"
            f"{'' if r.passed else ', beyond tolerance'}{'' if r.computed else ', constant'}</title></circle>"
        )
    parts += points
    parts.append(f'<text x="{left}" y="{height - 8}" font-size="10">tensors in graph order ({n})</text>')
    parts.append("</svg>")
    return "".join(parts)


def diagnosis_html(d: Diagnosis) -> str:
    """report.html's block for one failing case: the divergence profile and the fix that was run."""
    if d.verified:
        kept = _names(d.fix_nodes) if d.fix_nodes else "every " + ", ".join(d.fix_ops) + " node"
        fix = (
            f"<p>Verified fix: with {escape(kept)} in FP32 this case passes (error "
            f"{fmt_error(d.fix_error)}, share {100 * (d.fix_share or 0.0):.1f} %): <code>{escape(d.command)}</code></p>"
        )
    elif d.low_nodes == 0:
        fix = "<p>No node runs in low precision in this case: there is no node to keep FP32.</p>"
    else:
        fix = (
            f"<p>No fix found within {d.budget} evaluations; search further with <code>{escape(d.tune_command)}"
            "</code></p>"
        )
    svg = profile_svg(d)
    return (
        (
            f'<div class="diagnosis"><p>Divergence profile (every tensor vs the FP32 run\'s own intermediates):</p>'
            f"<figure>{svg}<figcaption>{PROFILE_CAPTION}</figcaption></figure>{fix}</div>"
        )
        if svg
        else f'<div class="diagnosis">{fix}</div>'
    )


def diagnosis_md(d: Diagnosis | None) -> list[str]:
    """report.md's lines under a failing case: the verified fix's command, or the tune command (none without a
    diagnosis, or when no node runs in low precision)."""
    if d is None or d.low_nodes == 0:
        return []
    if d.verified:
        kept = _names(d.fix_nodes) if d.fix_nodes else "every " + ", ".join(d.fix_ops) + " node"
        return [f"verified: with {kept} in FP32 this case passes: {d.command}"]
    return [f"fix not found within {d.budget} evaluations: {d.tune_command}"]
