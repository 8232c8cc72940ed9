"""ReportSession: per-worker case files, the merge at the end, settling expected failures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.errors import UserError
from harness.pipeline.verdict import settled as settle
from harness.report import CaseRecord, Provenance, read_report
from harness.report.collect import FinishedReport, ReportSession, worker_name
from harness.report.runs import is_active, run_folders
from harness.sweep import SweepPoint

PROV = Provenance(castguard="0", onnx="0", onnxruntime="0", numpy="0", python="3", platform="p", hostname="h")


def _record(precision: str = "fp16", status: str = "pass", model: str = "m") -> CaseRecord:
    return CaseRecord(
        model=model,
        model_sha256="ab" * 32,
        case=SweepPoint(precision=precision),
        status=status,
        runner="emulate",
        inputs_id="seed0-it1-x",
        lowp_flop_share=0.5,
        cast_count=2,
    )


def _finish(session: ReportSession, **kwargs: object) -> FinishedReport | None:
    report = session.build(provenance=PROV, **kwargs)  # type: ignore[arg-type]
    return None if report is None else session.write(report)


def test_workers_write_their_own_files_and_the_controller_merges_them(tmp_path: Path) -> None:
    controller = ReportSession(report_dir=tmp_path, worker=worker_name(None))
    controller.start()
    workers = [
        ReportSession(report_dir=tmp_path, run_id=controller.run_id, worker=worker_name({"workerid": f"gw{i}"}))
        for i in range(2)
    ]
    workers[0].add(_record("fp16"))
    workers[1].add(_record("bf16", "fail"))
    workers[1].add(_record("fp16", model="other"))
    cases = controller.run_dir / "cases"
    assert cases.parent.parent == tmp_path / "runs"
    assert sorted(p.name for p in cases.iterdir()) == ["gw0.jsonl", "gw1.jsonl"]
    finished = _finish(controller, planned_cases=3)
    assert finished is not None and finished.published is not None
    report = read_report(finished.paths.json)
    assert [(c.model, c.case.precision, c.status) for c in report.cases] == [
        ("m", "bf16", "fail"),
        ("m", "fp16", "pass"),
        ("other", "fp16", "pass"),
    ]
    assert report.run_id == controller.run_id and report.complete and report.planned_cases == 3
    assert finished.paths.markdown.is_file() and finished.paths.html.is_file()
    assert finished.summary_line(relative_to=tmp_path) == (
        "castguard: 3 cases: 2 pass, 1 fail; report: report.md, report.html, report.json"
    )
    assert not cases.exists()  # merged, then removed
    assert read_report(finished.run_paths.json).cases == report.cases  # the run keeps its own copy
    assert not is_active(controller.run_dir)


def test_two_runs_in_one_report_folder_never_see_each_others_records(tmp_path: Path) -> None:
    first, second = ReportSession(report_dir=tmp_path), ReportSession(report_dir=tmp_path)
    first.start()
    second.start()
    assert first.run_id != second.run_id and is_active(first.run_dir) and is_active(second.run_dir)
    for model in ("a", "b", "c"):
        first.add(_record("fp16", model=model))
    second.add(_record("bf16"))
    done_second = _finish(second, planned_cases=1)
    assert done_second is not None and len(done_second.report.cases) == 1
    assert is_active(first.run_dir)  # pruning never touches a running run
    done_first = _finish(first, planned_cases=3)
    assert done_first is not None and [c.model for c in done_first.report.cases] == ["a", "b", "c"]
    assert read_report(tmp_path / "report.json").run_id == first.run_id  # the last complete run is published
    assert read_report(done_second.run_paths.json).run_id == second.run_id


def test_an_interrupted_run_keeps_the_previous_complete_report(tmp_path: Path) -> None:
    done = ReportSession(report_dir=tmp_path)
    done.start()
    done.add(_record("fp16", model="old"))
    assert _finish(done, planned_cases=1) is not None
    published = (tmp_path / "report.json").read_bytes()
    cut = ReportSession(report_dir=tmp_path)
    cut.start()
    cut.add(_record("fp16"))
    cut.add(_record("bf16"))
    finished = _finish(cut, interrupted=True, planned_cases=24)
    assert finished is not None and finished.published is None
    assert (tmp_path / "report.json").read_bytes() == published
    assert finished.summary_line(relative_to=tmp_path) == (
        f"castguard: interrupted after 2 of 24 cases (2 cases: 2 pass); partial report: runs/{cut.run_id}/report.md;"
        " the previous complete report (if any) is kept, marked as not the latest run"
    )
    top = (tmp_path / "report.md").read_text()  # the old report never passes for this run's (issue 23)
    assert top.startswith("<!--") and f"The latest run, `{cut.run_id}`" in top and "did not complete" in top
    assert f"runs/{cut.run_id}/report.md" in top and f"`{cut.run_id}`" in (tmp_path / "report.html").read_text()
    again = ReportSession(report_dir=tmp_path)  # a second interrupted run replaces the banner
    again.start()
    again.add(_record("fp16"))
    _finish(again, interrupted=True, planned_cases=24)
    top = (tmp_path / "report.md").read_text()
    assert f"`{again.run_id}`" in top and f"`{cut.run_id}`" not in top and top.count("Not the latest run") == 1
    nxt = ReportSession(report_dir=tmp_path)  # the next complete run publishes a report without one
    nxt.start()
    nxt.add(_record("fp16"))
    _finish(nxt, planned_cases=1)
    assert "Not the latest run" not in (tmp_path / "report.md").read_text()
    partial = read_report(finished.run_paths.json)
    assert partial.interrupted and partial.planned_cases == 24 and not partial.clean
    assert "**Interrupted after 2 of 24 cases.**" in finished.run_paths.markdown.read_text()
    assert "Interrupted after 2 of 24 cases." in finished.run_paths.html.read_text()


def test_an_interrupted_run_with_no_case_yet_still_says_so(tmp_path: Path) -> None:
    cut = ReportSession(report_dir=tmp_path)
    cut.start()
    finished = _finish(cut, interrupted=True, planned_cases=8)
    assert finished is not None and "interrupted after 0 of 8 cases" in finished.summary_line()


def test_published_paths_point_into_the_run_folder(tmp_path: Path) -> None:
    session = ReportSession(report_dir=tmp_path)
    session.start()
    session.add(replace(_record(), outputs_file="outputs/m/x/case.npz", golden_file="outputs/m/x/golden.npz"))
    finished = _finish(session)
    assert finished is not None
    top = read_report(tmp_path / "report.json").cases[0]
    own = read_report(finished.run_paths.json).cases[0]
    assert own.outputs_file == "outputs/m/x/case.npz"
    assert top.outputs_file == f"runs/{session.run_id}/outputs/m/x/case.npz"
    assert top.golden_file == f"runs/{session.run_id}/outputs/m/x/golden.npz"


def test_old_runs_are_pruned_but_never_the_published_one(tmp_path: Path) -> None:
    ids = []
    for index in range(5):
        session = ReportSession(report_dir=tmp_path, run_id=f"20261122T10000{index}Z-1-000{index}", keep_runs=2)
        session.start()
        session.add(_record())
        _finish(session, interrupted=index == 4)  # the newest run is interrupted: run 3 stays published
        ids.append(session.run_id)
    left = [p.name for p in run_folders(tmp_path)]
    assert left == ids[3:]  # 2 kept: the published run (3) and this interrupted one (4)
    assert read_report(tmp_path / "report.json").run_id == ids[3]


def test_an_empty_run_writes_nothing(tmp_path: Path) -> None:
    session = ReportSession(report_dir=tmp_path)
    session.start()
    assert session.collect() == [] and _finish(session) is None
    assert not (tmp_path / "report.json").exists() and not is_active(session.run_dir)


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


@pytest.mark.parametrize(
    ("status", "expected", "settled"),
    [
        ("pass", False, "pass"),
        ("fail", False, "fail"),
        ("fail", True, "xfail"),
        ("pass", True, "xpass"),
        ("skip", True, "skip"),
        ("error", True, "error"),
    ],
)
def test_settle_marks_expected_failures(status: str, expected: bool, settled: str) -> None:
    assert settle(_record(status=status), expected_failure=expected).status == settled


def test_same_model_cases_are_named_in_the_summary_and_next_to_the_case(tmp_path: Path) -> None:
    session = ReportSession(report_dir=tmp_path)
    session.start()
    first = replace(_record("fp16"), converted_digest="d1")
    session.add(first)
    session.add(replace(_record("bf16"), reused_from=first.case_id, reuse_kind="graph", converted_digest="d1"))
    finished = _finish(session)
    assert finished is not None
    assert "2 cases: 2 pass (1 share another case's converted model)" in finished.summary_line()
    assert f"(same model as `{first.case_id}`)" in finished.paths.markdown.read_text()
    assert 'same model as <code class="id">' + first.case_id in finished.paths.html.read_text()
    assert "Notes:" not in finished.paths.markdown.read_text()  # shown next to the case, not as a note


def test_the_shared_model_count_does_not_depend_on_which_worker_ran_which_case(tmp_path: Path) -> None:
    """Issue 32.9: under -n 2 the count came from each worker's own reuse memory, so it changed between identical
    runs. Two schedules of the same three cases (one converted graph): one worker reusing twice, or two workers
    (one case run on each, one reused): the same count, from the graphs."""
    cases = [replace(_record(p), converted_digest="same") for p in ("fp16", "bf16")]
    third = replace(cases[0], case=replace(cases[0].case, data_max=8.0))
    one_worker = [
        cases[0],
        replace(cases[1], reused_from=cases[0].case_id, reuse_kind="graph"),
        replace(third, reused_from=cases[0].case_id, reuse_kind="graph"),
    ]
    two_workers = [cases[0], cases[1], replace(third, reused_from=cases[0].case_id, reuse_kind="graph")]
    lines = []
    for index, records in enumerate((one_worker, two_workers)):
        session = ReportSession(report_dir=tmp_path / str(index))
        session.start()
        for record in records:
            session.add(record)
        finished = _finish(session)
        assert finished is not None
        lines.append(finished.summary_line().split(";")[0])
    assert lines[0] == lines[1] == "castguard: 3 cases: 3 pass (2 share another case's converted model)"
