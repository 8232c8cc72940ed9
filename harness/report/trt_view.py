"""The TensorRT build check in the report and the terminal summary: text only, no verdicts.

Each case may carry a :class:`~harness.runners.tensorrt.typed_build.TrtBuild` (``CaseRecord.trt_build``). Cases whose
converted models are identical share one build (the cache), so findings are grouped by what TensorRT said.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.model import CaseRecord
from harness.runners.tensorrt.buildfacts import NodeTypes, TrtBuild

MD_NODE_ROWS = 30  # report.md shows per-node types for models up to this many nodes (report.html: all kept)


def trt_cell(case: CaseRecord) -> str:
    """The case table's short TensorRT column: ``ok, 0.4 MB`` / ``DOES NOT BUILD: HardSwish (bf16)`` / ``–``."""
    build = case.trt_build
    if build is None:
        return "–"
    if build.ok:
        return f"ok, {(build.plan_bytes or 0) / 1e6:.1f} MB"
    if build.outcome == "types":
        return f"TYPES CHANGED ({len(build.type_changes)})"
    if build.outcome == "parse" and build.parse_failures:
        first = build.parse_failures[0]
        return f"DOES NOT BUILD: {first.op}" + (f" ({first.dtype})" if first.dtype else "")
    if build.outcome == "build" and build.build_culprits:
        culprit = build.build_culprits[0]
        return (
            f"DOES NOT BUILD: {culprit.op}"
            + (f" ({culprit.dtype})" if culprit.dtype else "")
            + f" at node {culprit.node}"
        )
    return "DOES NOT BUILD" if build.outcome == "build" else "BUILDER CRASHED"


def checked(cases: Sequence[CaseRecord]) -> list[CaseRecord]:
    return [c for c in cases if c.trt_build is not None]


def findings(cases: Sequence[CaseRecord]) -> list[tuple[str, list[str]]]:
    """``(what TensorRT said, [case labels])`` for every case that does not build or whose types changed."""
    grouped: dict[str, list[str]] = {}
    for case in checked(cases):
        assert case.trt_build is not None
        if not case.trt_build.ok:
            grouped.setdefault(case.trt_build.summary(), []).append(f"{case.model} [{case.case_id}]")
    return sorted(grouped.items())


def headline(cases: Sequence[CaseRecord]) -> str | None:
    """``TensorRT build check (TensorRT-RTX 1.7.1.116): 11 of 12 cases build, 1 does not`` (None: nothing checked)."""
    done = checked(cases)
    if not done:
        return None
    backends = sorted({c.trt_build.backend for c in done if c.trt_build is not None})
    good = sum(1 for c in done if c.trt_build is not None and c.trt_build.ok)
    bad = len(done) - good
    seconds = {
        (c.model, c.model_sha256, c.trt_build.plan_bytes, c.trt_build.seconds) for c in done if c.trt_build is not None
    }
    tail = f", {bad} do{'es' if bad == 1 else ''} not build as converted or changed types" if bad else ""
    return (
        f"TensorRT build check ({', '.join(backends)}): {good} of {len(done)} checked case(s) build with the "
        f"converted types{tail}; {len(seconds)} distinct build(s), "
        f"{sum(s for *_, s in seconds):.1f} s building"
    )


def node_tables(cases: Sequence[CaseRecord], *, max_rows: int) -> list[tuple[list[str], TrtBuild]]:
    """Distinct per-node type tables (cases with identical rows share one), for builds of up to ``max_rows`` nodes."""
    tables: dict[tuple[NodeTypes, ...], tuple[list[str], TrtBuild]] = {}
    for case in checked(cases):
        build = case.trt_build
        assert build is not None
        if build.nodes and build.nodes_total == len(build.nodes) and len(build.nodes) <= max_rows:
            tables.setdefault(build.nodes, ([], build))[0].append(case.case_id)
    return list(tables.values())


def plan_mark(row: NodeTypes) -> str:
    """``same`` when TensorRT kept the ONNX types, ``CHANGED`` when not, ``no tensor`` when it made none."""
    if not row.tensorrt:
        return "no tensor"
    pairs = zip(row.onnx.split(","), row.tensorrt.split(","))
    return (
        "CHANGED"
        if any(o not in ("", "?") and t and o != t and (o, t) != ("int64", "int32") for o, t in pairs)
        else "same"
    )
