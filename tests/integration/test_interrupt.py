"""Ctrl-C anywhere ends in one line, exit 130 and whole files (issue 33.5).

SIGINT is sent to real processes at fixed points (a conftest or a wrapper that signals its own process at a
named step: while the report is rendered, before the published report is written, after it was; while
``castguard convert`` or ``castguard tune`` saves its model) and at seeded random times during ``castguard
convert``.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

from tests.helpers.graphs import mlp_model, save

ONE_CASE = ["--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false"]
REPO = Path(__file__).resolve().parents[2]

# signal this process at a fixed point of the report's writing (POINT: render, publish, published)
CONFTEST = """
import os, signal
import harness.report.collect as collect

POINT = {point!r}
_render, _write = collect.render_report, collect.write_report
_calls = []


def _stop():
    os.kill(os.getpid(), signal.SIGINT)


def render(*args, **kwargs):
    if POINT == "render":
        _stop()
    return _render(*args, **kwargs)


def write(report, folder, **kwargs):
    _calls.append(folder)
    if POINT == "publish" and len(_calls) == 2:
        _stop()
    done = _write(report, folder, **kwargs)
    if POINT == "published" and len(_calls) == 2:
        _stop()
    return done


collect.render_report, collect.write_report = render, write
"""


def pytest_run(folder: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--model", "m.onnx", *ONE_CASE]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "my project"
    save(mlp_model(), folder / "m.onnx")
    (folder / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n[tool.castguard]\n')
    assert pytest_run(folder).returncode == 1  # the golden
    assert pytest_run(folder).returncode == 0  # a published report
    return folder


def no_temp_files(folder: Path) -> None:
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("point", ["render", "publish", "published"])
def test_ctrl_c_while_the_report_is_written(project: Path, point: str) -> None:
    before = json.loads((project / "castguard-report" / "report.json").read_text())["run_id"]
    (project / "conftest.py").write_text(CONFTEST.format(point=point))
    done = pytest_run(project)
    out = done.stdout + done.stderr
    assert done.returncode == 130, out[-3000:]
    assert "Traceback" not in out and "KeyboardInterrupt" not in out and "INTERNALERROR" not in out
    assert out.count("castguard: interrupted (Ctrl-C)") == 1
    report_dir = project / "castguard-report"
    published = json.loads((report_dir / "report.json").read_text())  # whole
    markdown = (report_dir / "report.md").read_text()
    if point == "published":
        assert published["run_id"] != before and "Not the latest run" not in markdown
        assert "after this run's report was published" in out
    else:
        assert published["run_id"] == before
        assert "Not the latest run" in markdown and "interrupted (Ctrl-C) while its report was written" in markdown
    no_temp_files(report_dir)


WRAPPER = """
import os, signal, sys
import harness.core.files as files

_write = files.atomic_write


def write(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return _write(*args, **kwargs)


files.atomic_write = write
for name in ("harness.data.onnxsave", "harness.tune.plan", "harness.tune.cli"):
    module = sys.modules.get(name)
    if module is not None and hasattr(module, "atomic_write"):
        module.atomic_write = write
import harness.data.onnxsave
harness.data.onnxsave.atomic_write = write
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["convert", "tune"])
def test_ctrl_c_while_convert_or_tune_saves(tmp_path: Path, command: str) -> None:
    folder = tmp_path / "a folder"
    save(mlp_model(), folder / "m.onnx")
    out = folder / "out" / "m16.onnx"
    args = [command, "--onnx_path", str(folder / "m.onnx"), "--output_path", str(out)]
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args], cwd=folder, capture_output=True, text=True, timeout=300, check=False
    )
    text = done.stdout + done.stderr
    assert done.returncode == 130, text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert text.count("interrupted (Ctrl-C)") == 1
    assert not out.exists() and not out.with_suffix(".plan.json").exists()
    no_temp_files(folder)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ctrl_c_at_a_random_time_in_convert(tmp_path: Path, seed: int) -> None:
    folder = tmp_path / "a folder"
    save(mlp_model(), folder / "m.onnx")
    out = folder / "m16.onnx"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "convert", "--onnx_path", "m.onnx", "--output_path", str(out)],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(random.Random(seed).uniform(0.5, 4.0))
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    text = stdout + stderr
    assert process.returncode in (0, 130), text[-3000:]
    assert "Traceback" not in text
    if process.returncode == 130:
        assert text.count("interrupted (Ctrl-C)") == 1
    if out.exists():
        onnx.checker.check_model(onnx.load(str(out)))  # whole
    no_temp_files(folder)
