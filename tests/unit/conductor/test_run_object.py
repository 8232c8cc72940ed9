"""The one plugin state object (issue 25 item 3): :class:`harness.conductor.CastguardRun` runs a whole castguard run
without pytest, and the plugin keeps only it in its stash, with hooks of at most 3 lines."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

from harness.conductor import CastguardRun
from harness.options import add_nightly_options, add_options
from tests.helpers.graphs import mlp_model, save

PLUGIN = Path(__file__).resolve().parents[3] / "harness" / "plugin"
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
