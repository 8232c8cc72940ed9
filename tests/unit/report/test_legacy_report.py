"""A report written in schema 1 (facts as notes) still reads: as a report, as a history file, as a baseline.

``tests/data/report_schema1.json`` was written by the schema-1 code (commit 051cb83: ``pytest --model
needs_constraints`` run twice, so every conversion came from the cache and 8 cases reused another's result).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from harness.nightly.comparison import compare_reports
from harness.nightly.history import HISTORY_SCHEMA, read_run
from harness.nightly.rules import RECOMMENDED_RULES, parse_rules
from harness.report import SCHEMA_VERSION, read_report
from harness.report.format import case_notes, grouped_notes, reuse_text
from harness.report.legacy import upgrade_case_v1
from harness.report.render_html import render_html
from harness.report.render_md import render_markdown
from harness.report.serde import report_from_dict, report_to_dict
from harness.report.view import report_view

OLD = Path(__file__).resolve().parents[2] / "data" / "report_schema1.json"
INPUTS = "inputs: seed 0, 1 iteration(s); x float32[1x8]: uniform in [1, 2] (--val-range)"


def test_the_old_file_is_really_schema_1_with_facts_in_notes() -> None:
    raw = json.loads(OLD.read_text())
    assert raw["schema_version"] == 1 and SCHEMA_VERSION == 2
    assert all("conversion from cache" in c["notes"] for c in raw["cases"])
    assert sum(any(n.startswith("same model as ") for n in c["notes"]) for c in raw["cases"]) == 8


def test_a_schema_1_report_reads_with_its_notes_moved_into_fields(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    shutil.copy(OLD, path)
    report = read_report(path)
    raw = {c["case_id"]: c for c in json.loads(OLD.read_text())["cases"]}
    assert report.schema_version == SCHEMA_VERSION and len(report.cases) == 12
    for case in report.cases:
        assert case.notes == (INPUTS,) and case.conversion_cached
        named = [n[len("same model as ") :] for n in raw[case.case_id]["notes"] if n.startswith("same model as ")]
        assert case.reused_from == (named[0] if named else None)
        assert case.reuse_kind == ("graph" if named else "")
    reused = [c for c in report.cases if c.reused_from is not None]
    assert len(reused) == 8 and all(c.reused_from in raw for c in reused)
    failing = [c for c in report.cases if c.status == "fail"]
    assert len(failing) == 4 and all(c.first_divergent is not None for c in failing)
    # display: the same words as schema 1 showed
    assert case_notes(reused[0]) == (INPUTS, "conversion from cache")
    assert reuse_text(reused[0]) == f"same model as {reused[0].reused_from}"
    assert dict(grouped_notes(report.cases))["conversion from cache"] == [c.case_id for c in report.cases]
    assert f"(same model as `{reused[0].reused_from}`)" in render_markdown(report_view(report))
    assert "conversion from cache" in render_html(report_view(report))


def test_a_schema_1_report_written_again_is_schema_2_and_round_trips(tmp_path: Path) -> None:
    report = report_from_dict(json.loads(OLD.read_text()))
    again = report_from_dict(json.loads(json.dumps(report_to_dict(report))))
    assert report_to_dict(again)["schema_version"] == 2 and again == report


def test_a_schema_1_history_file_and_baseline_keep_working(tmp_path: Path) -> None:
    old = json.loads(OLD.read_text())
    history = tmp_path / "2026-11-26T000000Z.json"
    history.write_text(json.dumps({"castguard_history": HISTORY_SCHEMA, "report": old, "verdict": None}))
    baseline = read_run(history).report
    assert all(c.conversion_cached for c in baseline.cases)
    current = dataclasses.replace(
        baseline, cases=tuple(dataclasses.replace(c, conversion_cached=False) for c in baseline.cases)
    )
    rules = parse_rules(RECOMMENDED_RULES + ",total_time:+50%")
    comparison = compare_reports(current, baseline, rules=rules, source=str(history))
    assert comparison and comparison.compared == 12 and not comparison.regressions


def test_every_fact_note_of_schema_1_has_its_field() -> None:
    case = {
        "notes": [
            "inputs: x",
            "conversion from cache",
            "TensorRT build check not run: no libnvinfer",
            "same model as fp16-a (identical precision plan)",
            "same precision plan as fp16-b",
            "2 float node(s) ran on the CPU EP, not the GPU: n1 (Add), n2 (Mul)",
            "golden drift: x",
        ]
    }
    assert upgrade_case_v1(case) == {
        "notes": ["inputs: x", "golden drift: x"],
        "conversion_cached": True,
        "trt_build_skipped": "no libnvinfer",
        "reused_from": "fp16-a",
        "reuse_kind": "plan",
        "same_plan_as": "fp16-b",
        "cpu_float_nodes": ["n1 (Add)", "n2 (Mul)"],
    }


def test_the_fields_are_shown_in_the_words_schema_1_wrote() -> None:
    raw = json.loads(OLD.read_text())
    case = raw["cases"][0]
    notes = [
        INPUTS,
        "TensorRT build check not run: no libnvinfer",
        "same precision plan as fp16-b",
        "2 float node(s) ran on the CPU EP, not the GPU: n1 (Add), n2 (Mul)",
        "conversion from cache",
    ]
    upgraded = report_from_dict({**raw, "cases": [{**case, "notes": notes}]}).cases[0]
    assert upgraded.notes == (INPUTS,) and upgraded.cpu_float_nodes == ("n1 (Add)", "n2 (Mul)")
    assert sorted(case_notes(upgraded)) == sorted(notes)
