"""Reading ``report.json`` files of schema version 1, whose facts travelled as notes. No pytest.

Schema 1 wrote what schema 2 keeps in typed :class:`~harness.report.model.CaseRecord` fields as display text in
``notes`` (written by the schema-1 code of ``run/case.py`` and ``run/dedup.py``). :func:`upgrade_v1` turns such a
report dict into a schema-2 dict once, at the door, so that history files and nightly baselines written before
keep working; no other module reads facts out of notes. The note texts below are frozen: they are what
schema 1 wrote, not what castguard writes now (that is :func:`harness.report.format.case_notes`).
"""

from __future__ import annotations

import copy
from typing import Any

V1_CACHE_HIT = "conversion from cache"
V1_SAME_MODEL = "same model as "
V1_SAME_PLAN = "same precision plan as "
V1_PLAN_MATCH = " (identical precision plan)"
V1_CPU_FALLBACK = " float node(s) ran on the CPU EP, not the GPU: "
V1_BUILD_SKIPPED = "TensorRT build check not run: "


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 report dict from a schema-1 one (the input is not modified)."""
    out = copy.deepcopy(data)
    out["schema_version"] = 2
    cases = out.get("cases")
    if isinstance(cases, list):
        out["cases"] = [upgrade_case_v1(c) if isinstance(c, dict) else c for c in cases]
    return out


def upgrade_case_v1(case: dict[str, Any]) -> dict[str, Any]:
    """One schema-1 case dict with its fact notes moved into the schema-2 fields."""
    notes = case.get("notes")
    if not isinstance(notes, list):
        return case
    kept: list[Any] = []
    for note in notes:
        if not isinstance(note, str) or not _fact(note, case):
            kept.append(note)
    return {**case, "notes": kept}


def _fact(note: str, case: dict[str, Any]) -> bool:
    """Move one note into its field when it is a fact of schema 1; whether it was one."""
    if note == V1_CACHE_HIT:
        case["conversion_cached"] = True
    elif note.startswith(V1_SAME_MODEL):
        rest = note[len(V1_SAME_MODEL) :]
        plan = rest.endswith(V1_PLAN_MATCH)
        case["reused_from"] = rest[: -len(V1_PLAN_MATCH)] if plan else rest
        case["reuse_kind"] = "plan" if plan else "graph"
    elif note.startswith(V1_SAME_PLAN):
        case["same_plan_as"] = note[len(V1_SAME_PLAN) :]
    elif note.startswith(V1_BUILD_SKIPPED):
        case["trt_build_skipped"] = note[len(V1_BUILD_SKIPPED) :]
    elif V1_CPU_FALLBACK in note and note.split(" ", 1)[0].isdigit():
        case["cpu_float_nodes"] = note.split(V1_CPU_FALLBACK, 1)[1].split(", ")
    else:
        return False
    return True
