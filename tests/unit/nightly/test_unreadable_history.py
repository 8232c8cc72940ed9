"""A history folder whose every file is unreadable is not "no runs yet" (issue 33 item 14): with
--fail-on-regression the run exits 2 and says which files could not be read; without it, the note says so and the
run is not failed. Before, such a folder let --fail-on-regression exit 0."""

from __future__ import annotations

from pathlib import Path

from harness.nightly.rules import parse_rules
from harness.nightly.run import NightlyOptions, NightlyRun
from tests.unit.nightly.test_history import _night

RULES = parse_rules("error:+25%,status")


def _damaged(folder: Path) -> None:
    folder.mkdir()
    (folder / "20261101T030000Z-0badf00d.json").write_text('{"castguard_history": 1, "report": ')
    (folder / "20261102T030000Z-0badf00e.json").write_text("[]")


def test_every_file_unreadable_exits_2_under_fail_on_regression(tmp_path: Path) -> None:
    _damaged(tmp_path / "hist")
    run = NightlyRun(NightlyOptions(history=tmp_path / "hist", rules=RULES))
    outcome = run.decide(_night(3))
    assert outcome.exit_code == run.exit_code == 2 and outcome.comparison is None
    lines = run.terminal_lines()
    assert lines[0].startswith(f"no baseline: {tmp_path / 'hist'}: every file of the history folder is unreadable")
    assert "20261101T030000Z-0badf00d.json" in lines[0] and "fix: move the damaged files away" in lines[0]


def test_without_rules_it_is_said_but_does_not_fail(tmp_path: Path) -> None:
    _damaged(tmp_path / "hist")
    run = NightlyRun(NightlyOptions(history=tmp_path / "hist"))
    assert run.decide(_night(3)).exit_code == 0
    assert "every file of the history folder is unreadable" in run.terminal_lines()[0]


def test_an_empty_history_folder_still_starts_afresh(tmp_path: Path) -> None:
    (tmp_path / "hist").mkdir()
    run = NightlyRun(NightlyOptions(history=tmp_path / "hist", rules=RULES))
    assert run.decide(_night(3)).exit_code == 0 and "has no runs yet" in run.terminal_lines()[0]
