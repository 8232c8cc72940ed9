"""ReportSession: per-worker case files, the merge at the end, settling expected failures."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.report import CaseRecord, Provenance, read_report
from harness.report.collect import ReportSession, settle, worker_name
from harness.sweep import Case

PROV = Provenance(castguard="0", onnx="0", onnxruntime="0", numpy="0", python="3", platform="p", hostname="h")


def _record(precision: str = "fp16", status: str = "pass", model: str = "m") -> CaseRecord:
    return CaseRecord(model=model, model_sha256="ab" * 32, case=Case(precision=precision), status=status,
                      runner="emulate", inputs_id="seed0-it1-x", lowp_flop_share=0.5, cast_count=2)


def test_workers_write_their_own_files_and_the_controller_merges_them(tmp_path: Path) -> None:
    controller = ReportSession(report_dir=tmp_path, worker=worker_name(None))
    controller.start()
    workers = [ReportSession(report_dir=tmp_path, worker=worker_name({"workerid": f"gw{i}"})) for i in range(2)]
    workers[0].add(_record("fp16"))
    workers[1].add(_record("bf16", "fail"))
    workers[1].add(_record("fp16", model="other"))
    assert sorted(p.name for p in (tmp_path / "cases").iterdir()) == ["gw0.jsonl", "gw1.jsonl"]
    finished = controller.finish(provenance=PROV)
    assert finished is not None
    report = read_report(finished.paths.json)
    assert [(c.model, c.case.precision, c.status) for c in report.cases] == [
        ("m", "bf16", "fail"), ("m", "fp16", "pass"), ("other", "fp16", "pass")]
    assert finished.paths.markdown.is_file() and finished.paths.html.is_file()
    assert finished.summary_line(relative_to=tmp_path) == (
        "castguard: 3 cases: 2 pass, 1 fail; report: report.md, report.html, report.json")
    assert not (tmp_path / "cases").exists()          # merged, then removed


def test_start_forgets_earlier_runs_and_an_empty_run_writes_nothing(tmp_path: Path) -> None:
    old = ReportSession(report_dir=tmp_path, worker="gw5")
    old.add(_record())
    session = ReportSession(report_dir=tmp_path)
    session.start()
    assert session.collect() == [] and session.finish(provenance=PROV) is None
    assert not (tmp_path / "report.json").exists()


def test_a_rerun_case_replaces_its_earlier_record(tmp_path: Path) -> None:
    session = ReportSession(report_dir=tmp_path)
    session.add(_record(status="fail"))
    session.add(_record(status="pass"))
    assert [r.status for r in session.collect()] == ["pass"]


def test_a_corrupt_case_line_is_a_user_error_naming_the_line(tmp_path: Path) -> None:
    session = ReportSession(report_dir=tmp_path)
    session.add(_record())
    with open(session.cases_file, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"model": "m"}) + "\n")
    with pytest.raises(UserError, match=r"main\.jsonl:2"):
        session.collect()


@pytest.mark.parametrize(("status", "expected", "settled"), [
    ("pass", False, "pass"), ("fail", False, "fail"), ("fail", True, "xfail"), ("pass", True, "xpass"),
    ("skip", True, "skip"), ("error", True, "error"),
])
def test_settle_marks_expected_failures(status: str, expected: bool, settled: str) -> None:
    assert settle(_record(status=status), expected_failure=expected).status == settled
