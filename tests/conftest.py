"""Shared test helpers: the one way a test runs castguard as a user does, in a project folder of its own.

``castguard_in(project, *args)`` runs ``pytest ARGS`` in ``project`` and returns a :class:`CastguardDone`: the exit
status, the output (pytest's own matchers: ``done.stdout.fnmatch_lines``, ``done.assert_outcomes``) and the run's
own ``report.json`` (the latest run folder under ``castguard-report/runs/``; None when the run wrote none).

* ``project`` a folder: ``python -m pytest`` in a subprocess (the plugin loads from its ``pytest11`` entry point,
  as for a user); ``tool="castguard"`` runs ``python -m harness ARGS`` (the command line), ``tool="python"`` runs
  ``python ARGS``; ``python`` another interpreter (a fresh virtual environment); ``extra_path`` folders go on
  ``PYTHONPATH`` (runner plugins "installed" with a dist-info there are discovered as pip-installed ones are);
  ``env`` more variables. ``PYTEST_ADDOPTS`` and xdist's worker variable of the outer run are not passed on.
* ``project`` a :class:`pytest.Pytester`: ``pytester.runpytest`` in this process (fast; what a test changed in this
  process, a plugin on ``sys.path`` or a cleared registry, holds there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

PYTEST = ("-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly")
TOOLS = {"pytest": PYTEST, "castguard": ("-m", "harness"), "python": ()}


@dataclass(frozen=True)
class CastguardDone:
    """A finished castguard run: pytest's view of its output (:class:`pytest.RunResult`) and its report (the run's
    own copy)."""

    result: pytest.RunResult
    report: dict[str, Any] | None

    @property
    def ret(self) -> int:
        return int(self.result.ret)

    @property
    def stdout(self) -> pytest.LineMatcher:
        return self.result.stdout

    @property
    def stderr(self) -> pytest.LineMatcher:
        return self.result.stderr

    @property
    def output(self) -> str:
        return self.result.stdout.str() + "\n" + self.result.stderr.str()

    @property
    def proc(self) -> subprocess.CompletedProcess[str]:
        """The run as a finished process (exit status, stdout, stderr)."""
        return subprocess.CompletedProcess([], self.ret, self.result.stdout.str(), self.result.stderr.str())

    @property
    def cases(self) -> list[dict[str, Any]]:
        return list(self.report["cases"]) if self.report else []

    def assert_outcomes(self, **counts: int) -> None:
        __tracebackhide__ = True
        self.result.assert_outcomes(**counts)

    def parseoutcomes(self) -> dict[str, int]:
        return self.result.parseoutcomes()


def run_castguard(
    project: Path | pytest.Pytester,
    *args: str,
    tool: Literal["pytest", "castguard", "python"] = "pytest",
    python: str = sys.executable,
    extra_path: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> CastguardDone:
    """Run castguard in ``project``; see the module docstring."""
    if isinstance(project, pytest.Pytester):
        assert tool == "pytest" and not extra_path and env is None, "in-process: pytest only, this process's env"
        return CastguardDone(result=project.runpytest("-p", "no:cacheprovider", *args), report=_report(project.path))
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    path = os.pathsep.join([*map(str, extra_path), *filter(None, [environ.get("PYTHONPATH")])])
    environ.update({"PYTHONPATH": path} if path else {})
    environ.update(env or {})
    command = [python, *TOOLS[tool], *args]
    began = time.monotonic()
    proc = subprocess.run(
        command, cwd=project, capture_output=True, text=True, timeout=timeout, check=False, env=environ
    )
    lines = (proc.stdout.splitlines(), proc.stderr.splitlines())
    result = pytest.RunResult(proc.returncode, *lines, duration=time.monotonic() - began)
    return CastguardDone(result=result, report=_report(project))


def _report(project: Path) -> dict[str, Any] | None:
    runs = sorted((project / "castguard-report" / "runs").glob("*/report.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(runs[-1].read_text(encoding="utf-8")) if runs else None


Run = Callable[..., CastguardDone]  # the castguard_in fixture's type


@pytest.fixture
def castguard_in() -> Run:
    """:func:`run_castguard`, as a fixture."""
    return run_castguard
