"""The one plugin state object (issue 25 item 3): :class:`harness.conductor.CastguardRun` runs a whole castguard run
without pytest, and the plugin keeps only it in its stash, with hooks of at most 3 lines. One finish (issue 29):
``castguard merge`` builds the same object from the shards and finishes through the same ``finish``; the
``castguard`` fixture's run has its report session from start-up, an xdist controller's under the run id its
workers wrote into."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from harness.conductor import CastguardRun
from harness.core.runid import RUN_ID_KEY, new_run_id
from harness.nightly.history import read_history
from harness.nightly.merge import read_night
from harness.nightly.rules import parse_rules
from harness.nightly.run import NightlyOptions, NightlyRun
from harness.options import add_nightly_options, add_options
from tests.helpers.graphs import mlp_model, save
from tests.helpers.shards import info, shard

PLUGIN = Path(__file__).resolve().parents[2] / "harness" / "plugin"
ONE_CASE = ["--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false"]


def _options(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument)
    add_nightly_options(parser.add_argument)
    return parser.parse_args(list(args))


def test_a_whole_run_without_pytest(tmp_path: Path) -> None:
    save(mlp_model(), tmp_path / "m.onnx")
    option = _options("--model", str(tmp_path / "m.onnx"), *ONE_CASE)
    run = CastguardRun.from_options(option, invocation_dir=tmp_path, rootpath=tmp_path)
    assert run.session is not None and run.report is not None
    run.start()
    assert run.session.check_fp32_golden("m").status == "fail"  # the golden is written: fails once
    outcome = run.session.check_low_precision(run.session.cases[0])
    assert outcome.record is not None and outcome.status == "pass"
    run.hold("t1", outcome.record)
    run.settle("t1", expected_failure=False)
    assert run.finish(0) == 0
    lines = run.terminal_lines()
    run.close()
    assert "castguard sweep report:" in lines
    assert any(line.startswith("castguard: 1 case: 1 pass; report: ") for line in lines)
    assert any(line.startswith("castguard inputs of m: ") for line in lines)
    published = json.loads((tmp_path / "castguard-report" / "report.json").read_text())
    assert published["run_id"] == run.run_id and [c["status"] for c in published["cases"]] == ["pass"]


def test_requested_runner_that_only_skipped_fails_the_run(tmp_path: Path) -> None:
    save(mlp_model(), tmp_path / "m.onnx")
    for allow, expected in ((False, 1), (True, 0)):
        option = _options(
            "--model",
            str(tmp_path / "m.onnx"),
            "--runner",
            "ort",
            *ONE_CASE,
            *(["--allow-skipped-runner"] if allow else []),
        )
        run = CastguardRun.from_options(option, invocation_dir=tmp_path, rootpath=tmp_path)
        assert run.session is not None and run.requested == ("ort",)
        run.start()
        run.session.check_fp32_golden("m")
        outcome = run.session.check_low_precision(run.session.cases[0])
        assert outcome.record is not None and outcome.status == "skip"  # ORT CPU is no fp16 oracle
        run.add(outcome.record)
        assert run.finish(0) == expected
        said = [line for line in run.terminal_lines() if "every case of the requested runner 'ort' skipped" in line]
        assert len(said) == (0 if allow else 1) and (allow or "not a low-precision oracle" in said[0])
        run.close()


def test_default_runner_skips_do_not_fail(tmp_path: Path) -> None:
    save(mlp_model(), tmp_path / "m.onnx")
    run = CastguardRun.from_options(
        _options("--model", str(tmp_path / "m.onnx"), *ONE_CASE), invocation_dir=tmp_path, rootpath=tmp_path
    )
    assert run.requested == ()


def _merged(tmp_path: Path, *, killed: bool, rules: str = "") -> tuple[CastguardRun, int, list[str]]:
    """``castguard merge`` of two shards (the second killed after one case, or complete), with a history (and
    ``--fail-on-regression rules``)."""
    folders = [
        shard(tmp_path / "a", info(1)),
        shard(tmp_path / "b", info(2), cases=1 if killed else None, finished=not killed),
    ]
    night = read_night(folders, out=tmp_path / "merged")
    nightly = NightlyRun(NightlyOptions(history=tmp_path / "history", rules=parse_rules(rules) if rules else ()))
    run = CastguardRun.from_night(night, out=tmp_path / "merged", nightly=nightly, invocation_dir=tmp_path)
    run.start()
    code = run.finish(night.exit_status())
    lines = run.terminal_lines()
    run.close()
    return run, code, lines


def test_a_merged_night_is_finished_by_the_run_objects_finish(tmp_path: Path) -> None:
    run, code, lines = _merged(tmp_path, killed=False)
    assert code == 0 and run.finished is not None and run.finished.error is None
    published = json.loads((tmp_path / "merged" / "report.json").read_text())
    assert published["run_id"] == run.run_id and len(published["cases"]) == 4 and not published["interrupted"]
    assert [s["state"] for s in published["shards"]] == ["complete", "complete"]
    assert lines[0] == "castguard merge: 2 of 2 shards complete" and "castguard sweep report:" in lines
    assert any(line.startswith("history: stored ") for line in lines)  # the nightly step of finish, once
    assert [r.unclean_reason for r in read_history(tmp_path / "history").runs] == [""]


def test_an_incomplete_merged_night_fails_with_the_run_banner_and_is_never_published(tmp_path: Path) -> None:
    run, code, lines = _merged(tmp_path, killed=True)
    assert code == 1 and run.finished is not None
    assert not (tmp_path / "merged" / "report.json").exists()
    own = json.loads((run.finished.run_paths.json).read_text())
    assert own["interrupted"] and own["planned_cases"] == 4 and len(own["cases"]) == 3
    banner = "**This run FAILED (exit status 1): incomplete: 3 of 4 cases (shard 2/2 killed).**"
    assert banner in run.finished.run_paths.markdown.read_text()
    assert "the merged run is INCOMPLETE" in lines[0]
    assert [r.unclean_reason for r in read_history(tmp_path / "history").runs] == ["incomplete"]


@pytest.mark.parametrize("killed", [False, True])
def test_an_unreadable_history_under_fail_on_regression_is_exit_2_whatever_the_cases_say(
    tmp_path: Path, killed: bool
) -> None:
    """One rule for a pytest run and a merged night: the gate cannot be evaluated, a usage error (exit 2), also
    when cases failed or the night is incomplete (before, pytest said 1 then and castguard merge 2)."""
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "20261101T030000Z-0badf00d.json").write_text('{"castguard_history": 1, "report": ')
    run, code, lines = _merged(tmp_path, killed=killed, rules="status")
    assert code == 2 and any("every file of the history folder is unreadable" in line for line in lines), lines


def test_the_fixture_only_run_has_its_report_session_from_start_up(tmp_path: Path) -> None:
    """No --model: the report session exists at once; nothing is made on disk until a check writes a case."""
    run = CastguardRun.from_options(_options(), invocation_dir=tmp_path, rootpath=tmp_path)
    assert run.session is None and run.report is not None and run.run_id is not None
    run.start()
    assert run.finish(1) == 1 and run.finished is None  # the fixture was not used: no report, nothing marked
    run.close()
    assert not (tmp_path / "castguard-report").exists()


def test_an_xdist_controller_takes_over_the_run_its_workers_fixture_checks_wrote(tmp_path: Path) -> None:
    model = save(mlp_model(), tmp_path / "m.onnx")
    first = CastguardRun.from_options(_options(), invocation_dir=tmp_path, rootpath=tmp_path)  # no xdist
    assert first.checker().check(model, precision="fp16", runner="emulate").golden_written
    assert first.run_id is not None and (tmp_path / "castguard-report" / "runs" / first.run_id).is_dir()  # made now
    first.close()
    reserved = new_run_id()  # what the controller hands its workers before its run is built
    worker = CastguardRun.from_options(
        _options(), invocation_dir=tmp_path, rootpath=tmp_path, worker_input={"workerid": "gw0", RUN_ID_KEY: reserved}
    )
    assert worker.run_id == reserved
    result = worker.checker().recording(lambda record: worker.hold("test_mlp", record)).check(model, runner="emulate")
    assert result.status == "pass"
    worker.settle("test_mlp", expected_failure=False)
    assert worker.finish(0) == 0 and worker.finished is None  # a worker writes no report
    controller = CastguardRun.from_options(_options(), invocation_dir=tmp_path, rootpath=tmp_path, run_id=reserved)
    controller.start()
    assert controller.finish(0) == 0
    controller.close()
    published = json.loads((tmp_path / "castguard-report" / "report.json").read_text())
    assert published["run_id"] == reserved and [c["status"] for c in published["cases"]] == ["pass"]


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_the_plugin_keeps_one_state_object_and_short_hooks() -> None:
    keys = 0
    for path in PLUGIN.rglob("*.py"):
        tree = ast.parse(path.read_text())
        keys += sum(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "StashKey"
            for n in ast.walk(tree)
        )
    assert keys == 1
    hooks = {
        name: fn
        for name, fn in _functions(ast.parse((PLUGIN / "__init__.py").read_text())).items()
        if name.startswith("pytest_")
    }
    assert {"pytest_configure", "pytest_sessionfinish", "pytest_terminal_summary"} <= set(hooks)
    for name, fn in hooks.items():
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        lines = {
            n.lineno
            for s in body
            for n in ast.walk(s)
            if hasattr(n, "lineno") and not isinstance(n, (ast.ImportFrom, ast.Import))
        }
        assert len(lines) <= 3, f"{name} has {len(lines)} lines"
