"""A failing case's printed ``fix:`` command still works after ``keep_runs`` further runs (issue 32.6).

Its files (the golden's feeds it reads as ``--calibration_data``, the model it writes) used to live in
``castguard-report/runs/<id>/diagnose/``, which pruning deletes; they now live in ``castguard-report/fixes/``.
The command is run as printed, through a shell, from another folder with a space in its name.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import onnx

from tests.helpers.graphs import cancellation_model, save

REPO = Path(__file__).resolve().parents[2]
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "true")


def env() -> dict[str, str]:
    found = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    found.pop("PYTEST_ADDOPTS", None)
    return found


def test_a_printed_fix_command_works_after_keep_runs_further_runs(tmp_path: Path) -> None:
    project = tmp_path / "my project"
    model = save(cancellation_model(), project / "models" / "cancel.onnx")
    (project / "pyproject.toml").write_text("[tool.castguard]\nkeep_runs = 1\n")

    def run() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--model={model}", *ONE_CASE]
        return subprocess.run(command, cwd=project, env=env(), capture_output=True, text=True, timeout=300)

    run()  # writes the golden
    first = run()
    assert first.returncode == 1, first.stdout[-3000:]
    fixes = [
        line.split("fix: ", 1)[1] for line in first.stdout.splitlines() if line.strip().startswith("fix: castguard")
    ]
    assert fixes, first.stdout[-4000:]
    runs = project / "castguard-report" / "runs"
    first_runs = set(runs.iterdir())
    for _ in range(2):  # keep_runs = 1: the first failing run's folder is pruned
        run()
    assert not first_runs & set(runs.iterdir())
    assert "/runs/" not in fixes[0] and "castguard-report/fixes/" in fixes[0]
    other = tmp_path / "another folder"
    other.mkdir()
    done = subprocess.run(fixes[0], shell=True, cwd=other, env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    args = shlex.split(fixes[0])
    written = Path(args[args.index("--output_path") + 1])
    assert written.is_file() and "fixes" in written.parts
    onnx.checker.check_model(onnx.load(str(written)))
