"""Run history: atomic one-file-per-run storage, corrupt files skipped by name, clean baselines, trends."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from harness.core.errors import UserError
from harness.nightly.baseline import load_baseline
from harness.nightly.history import accept_run, read_history, write_run
from harness.nightly.rules import parse_rules
from harness.nightly.run import NightlyOptions, NightlyRun, finish, nightly_options
from harness.nightly.trend_data import trends
from harness.nightly.trends import trend_png, trend_table_text, trends_html, trends_markdown
from harness.report import CaseRecord, Report
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE, output_stats, record_for, sample_report

RULES = parse_rules("error:+25%,status")
CASE = SweepPoint(precision="fp16", data_max=512.0)


def _night(day: int, *, max_rel: float = 1e-3, status: str = "pass", commit: str = "c0ffee") -> Report:
    record = dataclasses.replace(
        record_for(CASE), status=status, outputs=(output_stats("Plus214_Output_0", max_rel, passed=status == "pass"),)
    )
    provenance = dataclasses.replace(PROVENANCE, git_commit=commit * 6)
    return Report.build([record], created=f"2026-11-{day:02d}T02:00:00+00:00", provenance=provenance)


def _store(folder: Path, report: Report) -> Path | None:
    """What the plugin does at the end of a run with --history FOLDER --fail-on-regression RULES."""
    baseline, _ = load_baseline(folder)
    return finish(NightlyOptions(rules=RULES, history=folder), baseline, report).history_file


def test_a_run_round_trips_with_its_provenance(tmp_path: Path) -> None:
    report = sample_report()
    path = write_run(tmp_path / "hist", report, comparison=None)
    assert path.name.startswith("20261120T100000Z-") and path.suffix == ".json"
    assert [p.name for p in (tmp_path / "hist").iterdir()] == [path.name]  # no temporary files left
    history = read_history(tmp_path / "hist")
    assert [run.report for run in history.runs] == [report]
    assert history.runs[0].report.provenance.git_commit == PROVENANCE.git_commit
    assert history.skipped == () and history.runs[0].verdict is None


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"castguard_history": 1, "report": ', "unreadable history file"),
        ("[1, 2]", "not a castguard history file"),
        ('{"castguard_history": 99, "report": {}}', "castguard_history=99"),
        ('{"castguard_history": 1, "report": {"schema_version": 1}, "verdict": null}', "invalid history file"),
        ('{"castguard_history": 1, "report": REPORT, "verdict": {"regressions": "3"}}', "invalid history file"),
        (b"\xff\xfe\x00garbage", "unreadable history file"),
    ],
)
def test_corrupt_files_are_skipped_by_name_and_counted(tmp_path: Path, content: str | bytes, reason: str) -> None:
    folder = tmp_path / "hist"
    good = write_run(folder, _night(1), comparison=None)
    bad = folder / "20261102T020000-broken.json"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    else:
        bad.write_text(content.replace("REPORT", json.dumps(json.loads(good.read_text())["report"])))
    (folder / ".20261103.json.tmp123").write_text("partial")  # a crashed writer's temporary file: ignored
    (folder / "notes.txt").write_text("not a run")
    history = read_history(folder)
    assert [run.path for run in history.runs] == [good]
    assert [s.path for s in history.skipped] == [bad]
    assert reason in history.skipped[0].reason
    baseline, _ = load_baseline(folder)
    assert baseline is not None and baseline.source == str(good)
    outcome = finish(NightlyOptions(history=folder), baseline, _night(2))
    assert [s.path for s in outcome.skipped] == [bad]  # counted for the summary, by name


def test_the_baseline_of_a_history_is_its_latest_clean_run(tmp_path: Path) -> None:
    folder = tmp_path / "hist"
    first = _store(folder, _night(1))
    assert first is not None
    regressed = _store(folder, _night(2, max_rel=5e-3))  # +400 %: stored, but not a baseline
    assert read_history(folder).runs[-1].verdict.regressions == 1  # type: ignore[union-attr]
    baseline, _ = load_baseline(folder)
    assert baseline is not None and baseline.source == str(first)
    accept_run(folder, "latest")
    baseline, _ = load_baseline(folder)
    assert baseline is not None and baseline.source == str(regressed)
    with pytest.raises(UserError, match="no such run"):
        accept_run(folder, "nope.json")


def _cases(day: int, data_max: tuple[float, ...]) -> Report:
    records = [
        dataclasses.replace(record_for(SweepPoint(precision="fp16", data_max=d, keep_io_types=k)), status="pass")
        for d in data_max
        for k in (False, True)
    ]
    return Report.build(records, created=f"2026-11-{day:02d}T02:00:00+00:00", provenance=PROVENANCE)


def test_a_partial_run_is_no_baseline_until_accepted(tmp_path: Path) -> None:
    folder = tmp_path / "hist"
    full = _store(folder, _cases(1, (8.0, 512.0, math.inf)))  # 6 cases
    partial = _store(folder, _cases(2, (8.0,)))  # shares 2 of them
    run = read_history(folder).runs[-1]
    assert run.verdict is not None and (run.verdict.baseline_cases, run.verdict.shared) == (6, 2)
    assert run.partial and not run.clean and run.unclean_reason == "partial"
    baseline, note = load_baseline(folder)
    assert baseline is not None and baseline.source == str(full)
    assert "1 newer run(s) not used: 1 partial (lacking some of their baseline's cases)" in note
    outcome = finish(NightlyOptions(rules=RULES, history=folder), baseline, _cases(3, (8.0, 512.0, math.inf)))
    assert outcome.comparison is not None and outcome.comparison.compared == 6
    assert outcome.comparison.coverage == "baseline 6 cases, this run 6, shared 6"
    assert read_history(folder).runs[-1].clean
    accept_run(folder, partial.name)  # adopting the smaller set: explicit
    assert read_history(folder).runs[1].clean


def test_verdicts_stored_before_the_case_counts_still_read(tmp_path: Path) -> None:
    folder = tmp_path / "hist"
    _store(folder, _cases(1, (8.0, 512.0)))
    path = _store(folder, _cases(2, (8.0,)))
    assert path is not None
    data = json.loads(path.read_text())
    del data["verdict"]["baseline_cases"], data["verdict"]["shared"]
    path.write_text(json.dumps(data))
    run = read_history(folder).runs[-1]
    assert run.verdict is not None and run.verdict.missing == 0 and run.clean  # unknown: as before


def test_a_regression_says_since_when(tmp_path: Path) -> None:
    folder = tmp_path / "hist"
    _store(folder, _night(1))
    _store(folder, _night(2, max_rel=1.1e-3))  # within the rule
    _store(folder, _night(3, max_rel=5e-3, commit="bad123"))  # first bad night
    baseline, _ = load_baseline(folder)
    outcome = finish(NightlyOptions(rules=RULES, history=folder), baseline, _night(4, max_rel=6e-3))
    assert outcome.exit_code == 1
    (change,) = outcome.comparison.regressions  # type: ignore[union-attr]
    assert change.since == "2026-11-03T02:00:00+00:00"
    assert outcome.comparison.baseline_created == "2026-11-02T02:00:00+00:00"  # type: ignore[union-attr]


def test_without_rules_the_comparison_is_shown_but_never_fails(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps(json.loads(write_run(tmp_path / "h", _night(1), comparison=None).read_text())["report"]))
    baseline, note = load_baseline(base)
    outcome = finish(NightlyOptions(baseline=base), baseline, _night(2, status="fail"))
    assert note == f"baseline: {base}"
    assert outcome.comparison is not None and outcome.comparison.regressions
    assert outcome.exit_code == 0 and outcome.history_file is None


def test_baseline_paths(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "empty-history")[0] is None
    assert "has no runs yet" in load_baseline(tmp_path / "empty-history")[1]
    with pytest.raises(UserError, match="baseline report not found"):
        load_baseline(tmp_path / "missing" / "report.json")
    report_dir = tmp_path / "castguard-report"
    report_dir.mkdir()
    write_run(tmp_path / "h", _night(1), comparison=None)
    stored = json.loads(next((tmp_path / "h").iterdir()).read_text())
    (report_dir / "report.json").write_text(json.dumps(stored["report"]))
    baseline, _ = load_baseline(report_dir)
    assert baseline is not None and baseline.report == _night(1)


def test_rules_need_something_to_compare_with(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="nothing to compare with"):
        nightly_options(baseline=None, rules=["status"], history=None, strict_provenance=None, invocation_dir=tmp_path)
    with pytest.raises(UserError, match="unknown metric 'speed'"):
        nightly_options(
            baseline="b.json", rules=["speed:+1%"], history=None, strict_provenance=None, invocation_dir=tmp_path
        )
    options = nightly_options(
        baseline=None, rules=["status"], history="h", strict_provenance=True, invocation_dir=tmp_path
    )
    assert options.compare_with == tmp_path / "h" and options.strict_provenance


def _family_record(case: SweepPoint, *, error: float, share: float, status: str = "pass") -> CaseRecord:
    return dataclasses.replace(
        record_for(case),
        status=status,
        lowp_flop_share=share,
        outputs=(output_stats("y", 4 * error, passed=status == "pass"),),
    )


def test_trends_follow_max_error_and_best_share_per_family() -> None:
    fp16, bf16 = SweepPoint(precision="fp16", data_max=8.0), SweepPoint(precision="bf16", data_max=8.0)
    fp16_all = SweepPoint(precision="fp16", data_max=math.inf)
    runs = [
        Report.build(
            [
                _family_record(fp16, error=1e-3, share=0.5),
                _family_record(fp16_all, error=2e-3, share=1.0),
                _family_record(bf16, error=1e-2, share=0.5),
            ],
            created=f"2026-11-0{day}T02:00:00+00:00",
            provenance=PROVENANCE,
        )
        for day in (1, 2)
    ]
    runs.append(
        Report.build(
            [
                _family_record(fp16, error=1e-3, share=0.5),
                _family_record(fp16_all, error=math.inf, share=1.0, status="fail"),
                _family_record(bf16, error=1e-2, share=0.5),
            ],
            created="2026-11-03T02:00:00+00:00",
            provenance=PROVENANCE,
        )
    )
    (trend,) = trends(runs, last=2)
    assert trend.model == "mnist" and trend.families == ("bf16-emulate", "fp16-emulate")
    assert [run.created[:10] for run in trend.runs] == ["2026-11-02", "2026-11-03"]
    assert [run.max_error for run in trend.runs] == [
        (pytest.approx(1e-2), pytest.approx(2e-3)),
        (pytest.approx(1e-2), math.inf),
    ]
    assert [run.best_share for run in trend.runs] == [(0.5, 1.0), (0.5, 0.5)]
    assert [(run.passed, run.total) for run in trend.runs] == [(3, 3), (2, 3)]
    table = trend_table_text([trend])
    assert "max err fp16-emulate" in table and "best share fp16-emulate" in table and "inf" in table
    assert "2026-11-03 02:00 0123456" in table
    assert trend_png(trend).startswith(b"\x89PNG")
    assert '<section id="trends">' in trends_html([trend]) and "## Trends" in trends_markdown([trend])
    with pytest.raises(UserError, match="--last"):
        trends(runs, last=0)


def test_a_single_run_draws_no_trend() -> None:
    (trend,) = trends([_night(1)])
    assert trends_html([trend]) == "" and trends_markdown([trend]) == ""


def test_cli_history_prints_the_trend_table_and_counts_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    folder = tmp_path / "hist"
    for day in (1, 2, 3):
        _store(folder, _night(day, max_rel=1e-3 * day))
    (folder / "20261104T020000Z-deadbeef.json").write_text("{truncated")
    assert main(["history", str(folder), "--last", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mnist (2 run(s))")
    assert "2026-11-02 02:00 c0ffeec" in out and "2026-11-01" not in out
    assert "3 run(s) in" in out and "1 unreadable file(s) skipped" in out
    assert "skipped 20261104T020000Z-deadbeef.json: unreadable history file" in out
    assert main(["history", str(folder), "--accept", "latest"]) == 0
    assert "accepted: " in capsys.readouterr().out
    assert main(["history", str(folder), "--last", "0"]) == 2
    assert "--last: must be >= 1" in capsys.readouterr().err
    assert main(["history", str(tmp_path / "typo")]) == 2
    assert "history folder not found" in capsys.readouterr().err


def test_the_run_summary_and_report_count_skipped_files(tmp_path: Path) -> None:
    folder = tmp_path / "hist"
    _store(folder, _night(1))
    (folder / "20261101T030000Z-0badf00d.json").write_text('{"castguard_history": 1}')
    run = NightlyRun(NightlyOptions(history=folder, baseline=folder, rules=RULES))
    assert run.sections() == ([], []) and run.terminal_lines() == []  # nothing to render before the verdict
    outcome = run.decide(_night(2, max_rel=5e-3))
    assert run.exit_code == 1 and outcome.exit_code == 1 and run.outcome is outcome
    markdown, html = run.sections()
    lines = run.terminal_lines()
    assert lines[0].startswith(f"baseline: {folder}") and "1 regression(s)" in lines[1]
    assert "history: 1 unreadable file(s) skipped" in lines
    assert any("20261101T030000Z-0badf00d.json" in line for line in lines)
    text = "\n".join(markdown)
    assert "- history: 1 unreadable file(s) skipped" in text and "`20261101T030000Z-0badf00d.json`" in text
    assert "## Baseline comparison" in text and "## Trends" in text
    assert any('<section id="trends">' in part for part in html)


def _interrupted(day: int) -> Report:
    return dataclasses.replace(_night(day), interrupted=True, planned_cases=24)


def test_interrupted_and_unaccepted_failing_runs_are_never_the_baseline(tmp_path: Path) -> None:
    folder = tmp_path / "hist"
    first = _store(folder, _night(1))
    _store(folder, _night(2, status="fail"))  # a failing case: stored, never a baseline
    _store(folder, _interrupted(3))  # Ctrl-C after 1 of 24 cases: stored, never a baseline
    runs = read_history(folder).runs
    assert [run.unclean_reason for run in runs] == ["", "failing or erroring cases", "interrupted"]
    baseline, note = load_baseline(folder)
    assert baseline is not None and baseline.source == str(first)
    with pytest.raises(UserError, match="cannot be a baseline: interrupted"):
        accept_run(folder, "latest")
    only_bad = tmp_path / "bad"
    _store(only_bad, _interrupted(1))
    _store(only_bad, _night(2, status="error"))
    baseline, note = load_baseline(only_bad)
    assert baseline is None
    assert "has no clean run (1 with failing or erroring cases, 1 interrupted)" in note
    assert f"castguard history {only_bad} --accept latest" in note and "xfail" in note


def test_a_night_with_known_failures_can_be_accepted_as_the_baseline(tmp_path: Path) -> None:
    """Issue 32.4: a model that fails somewhere (data_max=inf overflows) never had a baseline, and --accept
    refused it. Accepted, it is the baseline (even the first night, which had no verdict to mark)."""
    folder = tmp_path / "hist"
    failing = _store(folder, _night(1, status="fail"))  # the first night: no baseline, so no verdict
    assert read_history(folder).runs[0].verdict is None and load_baseline(folder)[0] is None
    assert accept_run(folder, "latest") == failing
    run = read_history(folder).runs[0]
    assert run.accepted and run.clean and run.unclean_reason == ""
    baseline, note = load_baseline(folder)
    assert baseline is not None and baseline.source == str(failing) and "accepted by a person" in note
    with pytest.raises(UserError, match="cannot be a baseline: interrupted"):
        _store(folder, _interrupted(2))
        accept_run(folder, "latest")


def test_an_interrupted_run_says_so_in_the_nightly_notes(tmp_path: Path) -> None:
    folder = tmp_path / "hist"
    _store(folder, _night(1))
    run = NightlyRun(NightlyOptions(history=folder, baseline=folder, rules=RULES))
    run.decide(_interrupted(2))
    assert any(
        "interrupted after 1 of 24 cases" in line and "never used as a baseline" in line
        for line in run.terminal_lines()
    )


def test_renamed_cases_are_nothing_comparable_not_zero_regressions(tmp_path: Path) -> None:
    from harness.nightly.render import comparison_lines, comparison_markdown

    folder = tmp_path / "hist"
    _store(folder, _night(1))
    renamed = dataclasses.replace(
        record_for(SweepPoint(precision="fp16", data_max=8.0)),
        outputs=(output_stats("Plus214_Output_0", 1e-3, passed=True),),
    )
    report = Report.build([renamed], created="2026-11-02T02:00:00+00:00", provenance=PROVENANCE)
    baseline, _ = load_baseline(folder)
    outcome = finish(NightlyOptions(rules=RULES, history=folder), baseline, report)
    assert outcome.comparison is not None and outcome.comparison.nothing_comparable
    head = comparison_lines(outcome.comparison)[0]
    assert head.startswith("nothing comparable: none of this run's 1 case(s) matches one of the 1 case(s)")
    assert "regression" not in head and "0 case(s) compared" not in head
    assert "nothing comparable" in comparison_markdown(outcome.comparison)


def test_cli_history_marks_regressed_nights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32.9: ``castguard history`` showed a regressed night like a clean one."""
    from harness.cli import main

    folder = tmp_path / "hist"
    _store(folder, _night(1))
    _store(folder, _night(2, status="fail"))  # status regression against night 1
    _store(folder, _night(3))  # compared with night 1 (night 2 is not clean): no regression
    assert [run.mark for run in read_history(folder).runs] == ["clean", "REGRESSED (1)", "clean"]
    assert main(["history", str(folder)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("2026-11-0")}
    assert "REGRESSED (1)" in rows["2026-11-02"].split("c0ffeec", 1)[1]
    assert "REGRESSED" not in rows["2026-11-01"] and "REGRESSED" not in rows["2026-11-03"]
    assert main(["history", str(folder), "--accept", read_history(folder).runs[1].path.name]) == 0
    capsys.readouterr()
    assert main(["history", str(folder)]) == 0
    assert "REGRESSED (1), accepted" in capsys.readouterr().out
