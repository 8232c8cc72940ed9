"""Runs that never mix, lie or vanish: real pytest processes in one project folder.

* Two runs at once (an fp16 and a bf16 sweep, as a CI matrix on one checkout would start them) share the
  report folder and the cache; each reports exactly its own cases, in the terminal and in its own report.
* A run stopped with a real SIGINT says "interrupted after K of N cases" in the terminal, report.md and
  report.json, keeps the previous complete report in place, and is never a nightly baseline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.nightly.baseline import load_baseline
from harness.nightly.history import read_history
from tests.helpers.graphs import mlp_model, save

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
COMMAND = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--model", "mlp.onnx", "-m", "not adversarial"]


def _start(folder: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*COMMAND, *args], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
    )


def test_two_concurrent_runs_each_report_exactly_their_own_cases(tmp_path: Path) -> None:
    # The two runs are started together; on an idle machine one can finish before the other has started, which
    # would test nothing concurrent: the pair is run again (a fresh project) until their times overlapped.
    overlapped = [_concurrent_pair(tmp_path / f"project{attempt}") for attempt in range(3)]
    assert any(overlapped), "the two runs never overlapped in time in 3 attempts"


def _concurrent_pair(folder: Path) -> bool:
    """Two runs at once in ``folder``: each reports exactly its own cases; whether their times overlapped."""
    folder.mkdir()
    save(mlp_model(), folder / "mlp.onnx")
    report_dir = folder / "castguard-report"
    fp16 = _start(folder, "--precision", "fp16", "--keep-io-types", "both")  # 12 cases
    bf16 = _start(folder, "--precision", "bf16", "--data-max", "8,512")  # 4 cases
    outputs = {name: proc.communicate(timeout=300)[0] for name, proc in (("fp16", fp16), ("bf16", bf16))}
    assert "golden written" in outputs["fp16"] + outputs["bf16"]  # both wrote it (atomically), each failed once
    assert re.search(r"castguard: 12 cases: 12 pass( \(.*\))?; report: castguard-report/report\.md", outputs["fp16"])
    assert re.search(r"castguard: 4 cases: 4 pass( \(.*\))?; report: castguard-report/report\.md", outputs["bf16"])
    runs = {}
    for path in sorted((report_dir / "runs").glob("*/report.json")):
        data = json.loads(path.read_text())
        runs[data["run_id"]] = data
    mine = {rid: {c["case"]["precision"] for c in r["cases"]} for rid, r in runs.items()}
    assert sorted(map(sorted, mine.values())) == [["bf16"], ["fp16"]]  # never mixed
    assert sorted(len(runs[rid]["cases"]) for rid in mine) == [4, 12]
    published = json.loads((report_dir / "report.json").read_text())
    assert published["run_id"] in mine and len({c["case"]["precision"] for c in published["cases"]}) == 1
    assert not list(report_dir.glob("runs/*/cases"))  # merged and removed
    started = sorted(rid[:15] for rid in mine)  # YYYYMMDDTHHMMSS, as "created" below
    finished = sorted(runs[rid]["created"].replace("-", "").replace(":", "")[:15] for rid in mine)
    return started[1] <= finished[0]


def _wait_for_cases(report_dir: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        files = list(report_dir.glob("runs/*/cases/*.jsonl"))
        if files and sum(len(f.read_text().splitlines()) for f in files) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"the run did not reach {count} cases (exit {proc.poll()})")


def test_a_sigint_run_says_so_keeps_the_last_complete_report_and_is_never_a_baseline(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    save(mlp_model(), folder / "mlp.onnx")
    history = ["--history=history", "--baseline=history", "--keep-io-types", "both"]  # 24 cases
    complete = subprocess.run(
        [*COMMAND, *history], cwd=folder, capture_output=True, text=True, timeout=300, check=False, env=ENV
    )  # writes the golden (fails once), 24 cases
    assert "castguard: 24 cases: 24 pass" in complete.stdout, complete.stdout[-3000:]  # (some share a model)
    report_dir = folder / "castguard-report"
    before = (report_dir / "report.json").read_bytes()
    proc = _start(folder, *history)
    _wait_for_cases(report_dir, 2, proc)
    os.kill(proc.pid, signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 2, out[-3000:]  # pytest's "interrupted"
    # every planned case has a record (issue 33.1): the cases never reached are recorded as such (error)
    found = re.search(
        r"castguard: interrupted after (\d+) of 24 cases \(24 cases: \1 pass, (\d+) error\); partial report: "
        r"castguard-report/runs/(\S+)/report\.md; the previous complete report \(if any\) is kept",
        out,
    )
    assert found is not None, out[-3000:]
    done, unreached, run_id = int(found[1]), int(found[2]), found[3]
    assert 2 <= done < 24 and done + unreached == 24
    assert "REGRESSION" not in out  # a case never reached is no regression
    assert (report_dir / "report.json").read_bytes() == before  # the last complete report
    partial = json.loads((report_dir / "runs" / run_id / "report.json").read_text())
    assert partial["interrupted"] is True and partial["planned_cases"] == 24 and len(partial["cases"]) == 24
    assert sum(c.get("stopped") == "not_reached" for c in partial["cases"]) == unreached
    assert f"**Interrupted after {done} of 24 cases.**" in (report_dir / "runs" / run_id / "report.md").read_text()
    assert "never used as a baseline" in out
    runs = read_history(folder / "history").runs
    assert [run.report.interrupted for run in runs] == [False, True]  # stored, marked
    baseline, note = load_baseline(folder / "history")
    assert baseline is not None and baseline.source == str(runs[0].path), note  # the complete run
