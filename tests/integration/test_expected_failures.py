"""Nightly baselines on a model that fails somewhere (issue 32.4), typed as a user would, in subprocesses.

The model overflows fp16 only when data_max=inf converts everything (1e6 in the middle), so the default sweep's
``dmaxinf`` case fails on every night. Marked expected to fail (``[tool.castguard] xfail`` or ``--xfail``), it is
recorded as xfail, the night becomes the baseline, and the next nights compare with it. After a model change
and ``--update-goldens`` the "model changed" list appears once, says nothing false about a stale golden, and the
next night compares again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.helpers.graphs import make_model, save

REPO = Path(__file__).resolve().parents[2]
SWEEP = ("--precision", "fp16", "--data-max", "512,inf", "--exclude-ops", "none", "--keep-io-types", "true")


def overflow_model(scale: float = 1e-6) -> onnx.ModelProto:
    """y = ((x * 1000) * 1000) * scale: 1e6 in the middle overflows fp16 (data_max=inf); data_max=512 keeps the
    two last Muls FP32 and passes."""
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["a"], name="up1"),
        helper.make_node("Mul", ["a", "k"], ["b"], name="up2"),
        helper.make_node("Mul", ["b", "s"], ["y"], name="down"),
    ]
    inits = [
        numpy_helper.from_array(np.array(1000.0, np.float32), "k"),
        numpy_helper.from_array(np.array(scale, np.float32), "s"),
    ]
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, 8])], [("y", TensorProto.FLOAT, [1, 8])], initializers=inits)


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def night(project: Path, elsewhere: Path, n: int, *extra: str) -> subprocess.CompletedProcess[str]:
    history = project / "nightly history"
    return pytest_in(
        elsewhere,
        f"--model={project / 'models' / 'over.onnx'}",
        *SWEEP,
        f"--report-dir={project / f'report {n}'}",
        f"--history={history}",
        f"--baseline={history}",
        "--fail-on-regression=status,error:+25%",
        *extra,
    )


def test_expected_failures_do_not_block_the_baseline_and_a_model_change_is_not_stale_forever(tmp_path: Path) -> None:
    project = tmp_path / "my project"
    elsewhere = project / "a sub folder"  # run from inside the project (its pyproject applies), not its root
    elsewhere.mkdir(parents=True)
    save(overflow_model(), project / "models" / "over.onnx")
    (project / "pyproject.toml").write_text('[tool.castguard]\nxfail = ["*-dmaxinf-*"]\n')

    first = night(project, elsewhere, 0)  # writes the golden (that test fails once), cases run
    assert first.returncode == 1, first.stdout[-3000:]
    cases = json.loads((project / "report 0" / "report.json").read_text())["cases"]
    assert {c["case_id"].split("-")[1]: c["status"] for c in cases} == {"dmax512": "pass", "dmaxinf": "xfail"}
    assert "no clean run" not in first.stdout

    second = night(project, elsewhere, 1)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "0 regression(s), 0 improvement(s) over 2 case(s) compared" in second.stdout
    assert "1 xfailed" in second.stdout

    save(overflow_model(scale=1.001e-6), project / "models" / "over.onnx")  # the model changes
    third = night(project, elsewhere, 2, "--update-goldens")
    assert "Model changed since the baseline" in third.stdout and "stale" not in third.stdout
    fourth = night(project, elsewhere, 3)
    assert fourth.returncode == 0, fourth.stdout[-3000:]
    assert "over 2 case(s) compared" in fourth.stdout
    assert "Model changed" not in fourth.stdout and "stale" not in fourth.stdout


def test_xfail_on_the_command_line_and_an_xpass_is_reported(tmp_path: Path) -> None:
    elsewhere = tmp_path / "else where"
    elsewhere.mkdir()
    model = save(overflow_model(), tmp_path / "models" / "over.onnx")
    args = (f"--model={model}", *SWEEP, f"--goldens-dir={tmp_path / 'goldens'}")
    pytest_in(elsewhere, *args, f"--report-dir={tmp_path / 'r0'}")  # the golden
    done = pytest_in(
        elsewhere, *args, f"--report-dir={tmp_path / 'r1'}", "--xfail", "*-dmaxinf-*", "--xfail=over-*-dmax512-*"
    )
    assert done.returncode == 0, done.stdout[-3000:]
    cases = json.loads((tmp_path / "r1" / "report.json").read_text())["cases"]
    assert {c["case_id"].split("-")[1]: c["status"] for c in cases} == {"dmax512": "xpass", "dmaxinf": "xfail"}
    (line,) = [line for line in done.stdout.splitlines() if "expected to fail passed" in line]
    assert line.startswith("castguard: 1 case(s) expected to fail passed (xpass): over-") and "-dmax512-" in line
    bad = pytest_in(elsewhere, *args, f"--report-dir={tmp_path / 'r2'}", "--xfail=,")
    assert bad.returncode == 4 and "empty xfail pattern" in bad.stderr + bad.stdout
