"""issue 23, item 1 end to end: a failing case run by the plugin names the real cause, prints a fix it has run,
the printed command works as printed from another folder, and report.html draws the divergence profile."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx

from tests.helpers.diagnosis import fp32_nodes, output_path_of, passes, run_printed
from tests.helpers.graphs import save
from tests.helpers.llama import NORM_NODES, llama_model
from tests.integration.test_any_folder import pytest_in

CASE = ("--precision", "fp16", "--data-max", "inf", "--exclude-ops", "none", "--keep-io-types", "false")


def test_llama_failure_is_diagnosed_verified_and_its_command_runs(tmp_path: Path) -> None:
    models, empty, other = tmp_path / "my models", tmp_path / "run here", tmp_path / "other"
    for folder in (empty, other):
        folder.mkdir()
    model = save(llama_model(), models / "llama big.onnx")
    run = pytest_in(empty, "--model", str(model), "--report-dir", str(tmp_path / "report"), *CASE)
    out = run.stdout
    assert run.returncode == 1 and "FAILED ::test_low_precision[llama big-" in out, out[-4000:] + run.stderr[-2000:]
    assert "cause: tensor 'x2' from node '/m/norm/Pow' (Pow)" in out
    assert "Constant_28" not in out.split("cause:")[1].split("\n")[0]
    assert "verified: with '/m/norm/Pow', '/m/norm/ReduceMean' in FP32 this case passes (error " in out
    commands = set(re.findall(r"^\s*fix: (castguard convert .*)$", out, flags=re.MULTILINE))
    assert len(commands) == 1, out[-6000:]  # the one case's fix (it may be printed in more than one section)
    (command,) = commands
    assert "'" + str(model) + "'" in command and "--data_max inf" in command
    done = run_printed(command, other)
    assert done.returncode == 0, done.stderr[-2000:]
    fixed = onnx.load(str(output_path_of(command)))
    assert all(fp32_nodes(fixed, NORM_NODES[:2]).values())
    (golden,) = (empty / "goldens").rglob("*.npz")
    with np.load(golden) as data:
        feeds = [{"input_ids": data["input/0/input_ids"]}]
        goldens = [{"logits": data["output/0/logits"]}]
    assert passes(fixed, feeds, goldens)
    (report_file,) = (tmp_path / "report" / "runs").glob("*/report.json")
    report = json.loads(report_file.read_text())
    (failed,) = [c for c in report["cases"] if c["status"] == "fail"]
    diagnosis = failed["diagnosis"]
    assert diagnosis["verified"] and diagnosis["fix_nodes"] == list(NORM_NODES[:2])
    assert diagnosis["cause"]["node"] == "/m/norm/Pow" and diagnosis["command"] == command
    html = report_file.with_name("report.html").read_text()
    assert '<svg class="profile"' in html and 'class="cause"' in html and html.count('class="fix"') == 2
    md = report_file.with_name("report.md").read_text()
    assert "verified: with '/m/norm/Pow', '/m/norm/ReduceMean' in FP32 this case passes: castguard convert" in md


def test_no_diagnose_skips_the_diagnosis_and_says_so(tmp_path: Path) -> None:
    """--no-diagnose (and ``[tool.castguard] diagnose = false``): the same failing case, judged the same, with no
    divergence profile or fix, and a message that names the option that skipped it."""
    empty = tmp_path / "run here"
    empty.mkdir()
    model = save(llama_model(), tmp_path / "models" / "llama.onnx")
    run = pytest_in(empty, "--model", str(model), "--report-dir", str(tmp_path / "report"), "--no-diagnose", *CASE)
    out = run.stdout
    assert run.returncode == 1 and "FAILED ::test_low_precision[llama-" in out, out[-4000:] + run.stderr[-2000:]
    assert "not diagnosed: --no-diagnose ([tool.castguard] diagnose = false) skipped the diagnosis" in out
    assert "cause:" not in out and "verified:" not in out and "fix: castguard convert" not in out
    (report_file,) = (tmp_path / "report" / "runs").glob("*/report.json")
    (failed,) = [c for c in json.loads(report_file.read_text())["cases"] if c["status"] == "fail"]
    assert failed["diagnosis"] is None and failed["timings"]["diagnose_s"] == 0.0
    (empty / "pyproject.toml").write_text("[tool.castguard]\ndiagnose = false\n")
    again = pytest_in(empty, "--model", str(model), "--report-dir", str(tmp_path / "report2"), *CASE)
    assert again.returncode == 1 and "not diagnosed: --no-diagnose" in again.stdout, again.stdout[-3000:]
