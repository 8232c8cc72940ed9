"""Shared test helpers: the one way a test runs castguard as a user does, in a project folder of its own.

``castguard_in(project, *args)`` runs ``python -m pytest ARGS`` in ``project`` (a subprocess: the plugin loads from
its ``pytest11`` entry point, as for a user) and returns the process with the run's own ``report.json`` (the
latest run folder under ``castguard-report/runs/``; None when the run wrote none). ``extra_path`` folders go on
``PYTHONPATH`` (runner plugins "installed" with a dist-info there are discovered as pip-installed ones are).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class CastguardDone:
    """A finished castguard run: its process and its report (the run's own copy)."""

    proc: subprocess.CompletedProcess[str]
    report: dict[str, Any] | None

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    @property
    def cases(self) -> list[dict[str, Any]]:
        return list(self.report["cases"]) if self.report else []


def run_castguard(project: Path, *args: str, extra_path: Sequence[Path] = (), timeout: float = 600) -> CastguardDone:
    """Run castguard's suite in ``project``; see the module docstring."""
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, extra_path), *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    proc = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    runs = sorted((project / "castguard-report" / "runs").glob("*/report.json"), key=lambda p: p.stat().st_mtime)
    report = json.loads(runs[-1].read_text(encoding="utf-8")) if runs else None
    return CastguardDone(proc=proc, report=report)


@pytest.fixture
def castguard_in() -> Callable[..., CastguardDone]:
    """:func:`run_castguard`, as a fixture."""
    return run_castguard
