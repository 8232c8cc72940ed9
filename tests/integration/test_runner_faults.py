"""Runner plugins misbehaving inside a real ``pytest --model`` run (issues 33.6, 33.10, 34.7), with pytester.

A plugin that hangs or segfaults fails its own case with its last words and the run goes on to a whole report; a
plugin registered under a built-in name is one clear error where that name is used, and no error where it is not;
runner options reach the plugin from the command line, pyproject and the fixture; an honest fp32 plugin's skip
says that it ran.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.runners.registry import registered
from tests.conftest import Run
from tests.helpers.faulty_runners import ENTRY_POINTS, PLUGINS
from tests.helpers.graphs import mlp_model, save
from tests.helpers.plugin_dist import PACKAGE, install_into

pytest_plugins = ["pytester"]

ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")
CASE = "fp16-dmax512-imax65504-excl_none-keepio0"


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    registered.cache_clear()
    site = install_into(tmp_path / "site packages", entry_points=ENTRY_POINTS, extra_source=PLUGINS)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)
    save(mlp_model(), pytester.path / "models" / "my mlp.onnx")
    pytester.makepyprojecttoml('[project]\nname = "p"\nversion = "0"\n\n[tool.castguard]\n')
    yield pytester
    registered.cache_clear()


SUITE_ARGS = ("-rs", "--model", "models/my mlp.onnx", *ONE_CASE)  # the options of most runs here


def _statuses(pytester: pytest.Pytester) -> dict[str, tuple[str, str]]:
    report = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    return {c["case_id"]: (c["status"], c["message"]) for c in report["cases"]}


def test_a_hanging_and_a_crashing_plugin_fail_their_cases_and_the_run_goes_on(
    project: pytest.Pytester, castguard_in: Run
) -> None:
    castguard_in(project, *SUITE_ARGS)  # the golden
    result = castguard_in(
        project, *SUITE_ARGS, "--runner", "hang", "--runner", "segv", "--runner", "emulate", "--runner-timeout", "20"
    )
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    result.assert_outcomes(passed=2, failed=2)  # the golden test, emulate; hang and segv
    statuses = _statuses(project)
    assert statuses[f"{CASE}-emulate"][0] == "pass"
    hang, segv = statuses[f"{CASE}-hang"], statuses[f"{CASE}-segv"]
    assert hang[0] == "error" and "no answer within 20 s" in hang[1] and "never answers" in hang[1]
    assert segv[0] == "error" and "crashed with SIGSEGV" in segv[1] and "touching freed memory" in segv[1]


def test_runner_timeout_from_pyproject(project: pytest.Pytester, castguard_in: Run) -> None:
    project.makepyprojecttoml('[project]\nname = "p"\nversion = "0"\n\n[tool.castguard]\nrunner_timeout = 15\n')
    castguard_in(project, *SUITE_ARGS)
    castguard_in(project, *SUITE_ARGS, "--runner", "hang").assert_outcomes(passed=1, failed=1)
    assert "no answer within 15 s" in _statuses(project)[f"{CASE}-hang"][1]


def test_a_plugin_under_a_builtin_name_errs_only_where_that_name_is_used(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, castguard_in: Run
) -> None:
    registered.cache_clear()
    site = install_into(
        tmp_path / "site", name="evil-runner", entry_points="emulate = castguard_onnxref_runner:OnnxRefRunner"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)
    save(mlp_model(), pytester.path / "models" / "m.onnx")
    try:
        used = castguard_in(pytester, "--model", "models/m.onnx", *ONE_CASE)
        text = used.stdout.str() + used.stderr.str()
        assert "INTERNALERROR" not in text and "Traceback" not in text
        assert used.ret != 0
        assert text.count("registered by both") == 1 and "pip uninstall evil-runner" in text
        unused = castguard_in(pytester, "--model", "models/m.onnx", "--runner", "reference", *ONE_CASE)
        assert "INTERNALERROR" not in unused.stdout.str()
        unused.assert_outcomes(passed=1, failed=1)  # the golden written once, the reference case passes
    finally:
        registered.cache_clear()


def test_runner_options_from_the_command_line_pyproject_and_the_fixture(
    project: pytest.Pytester, castguard_in: Run
) -> None:
    castguard_in(project, *SUITE_ARGS)
    castguard_in(project, *SUITE_ARGS, "--runner", "readme").assert_outcomes(passed=2)
    doubled = castguard_in(project, *SUITE_ARGS, "--runner", "readme", "--runner-option", "readme:scale=2")
    doubled.assert_outcomes(passed=1, failed=1)  # outputs x2: the plugin got its option
    project.makepyprojecttoml(
        '[project]\nname = "p"\nversion = "0"\n\n[tool.castguard]\nrunner_options = {readme = {scale = 2}}\n'
    )
    castguard_in(project, *SUITE_ARGS, "--runner", "readme").assert_outcomes(passed=1, failed=1)
    castguard_in(project, *SUITE_ARGS, "--runner", "readme", "--runner-option", "readme:scale=1").assert_outcomes(
        passed=2
    )
    project.makepyprojecttoml('[project]\nname = "p"\nversion = "0"\n\n[tool.castguard]\n')
    project.makepyfile(
        test_user="""
def test_options(castguard):
    plain = castguard.check("models/my mlp.onnx", runner="readme")
    scaled = castguard.check("models/my mlp.onnx", runner="readme", runner_options={"readme": {"scale": 2}})
    assert plain.passed, plain.explain()
    assert not scaled.passed and scaled.status == "fail", scaled.explain()
"""
    )
    castguard_in(project, "test_user.py").assert_outcomes(passed=1)


def test_an_honest_fp32_plugin_is_told_it_ran_not_to_make_itself_available(
    project: pytest.Pytester, castguard_in: Run
) -> None:
    castguard_in(project, *SUITE_ARGS)
    result = castguard_in(project, *SUITE_ARGS, "--runner", "wide")
    out = result.stdout.str()
    assert result.ret == 1
    assert "wide ran, but it computes fp16/bf16 in fp32" in out
    assert "make wide available" not in out
