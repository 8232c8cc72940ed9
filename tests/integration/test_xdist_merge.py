"""Under pytest-xdist every worker's case results reach one report: nothing lost, nothing duplicated.

Runs ``pytest --model needs_constraints`` (a 12-case sweep) in a subprocess without xdist and with
``-n 2``, each into its own report folder, against the committed goldens, and compares the two reports.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SWEEP = [
    "--model",
    "needs_constraints",
    "--precision",
    "fp16",
    "--data-max",
    "8,512,inf",
    "--keep-io-types=both",  # 12
    "-m",
    "not adversarial",
]


def castguard(tmp_path: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run the accuracy suite in a subprocess; returns the process and the report.json it wrote."""
    report_dir = tmp_path / name
    # --option=value: pytest guesses its rootdir from every argument that names an existing path
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        *SWEEP,
        f"--goldens-dir={REPO / 'goldens'}",
        f"--report-dir={report_dir}",
        f"--cache-dir={tmp_path / f'cache-{name}'}",
        "-v",
        *args,
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert (report_dir / "report.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads((report_dir / "report.json").read_text())


def _keys(report: dict) -> list[tuple[str, str, str]]:
    return [(c["model"], c["case_id"], c["inputs_id"]) for c in report["cases"]]


def test_every_worker_reaches_one_report(tmp_path: Path) -> None:
    serial, alone = castguard(tmp_path, "serial")
    parallel, merged = castguard(tmp_path, "xdist", "-n", "2")
    assert "created: 2/2 workers" in parallel.stdout
    workers = set(re.findall(r"\[(gw\d+)\][^\n]*test_low_precision", parallel.stdout))
    assert workers == {"gw0", "gw1"}, parallel.stdout[-3000:]  # both workers ran cases
    ran = re.findall(r"test_low_precision\[[^\]]+\]", parallel.stdout)
    assert len(set(ran)) == 12
    assert len(_keys(merged)) == len(set(_keys(merged))) == 12  # nothing duplicated
    assert _keys(merged) == _keys(alone)  # nothing lost, same cases
    assert [c["status"] for c in merged["cases"]] == [c["status"] for c in alone["cases"]]
    assert [c["worst_max_rel"] for c in merged["cases"]] == [c["worst_max_rel"] for c in alone["cases"]]
    assert (
        merged["summary"] == alone["summary"] == {"pass": 8, "fail": 4, "xfail": 0, "xpass": 0, "skip": 0, "error": 0}
    )
    assert serial.returncode == parallel.returncode == 1  # the dmax=inf cases overflow
    assert not (tmp_path / "xdist" / "cases").exists() or not list((tmp_path / "xdist" / "cases").iterdir())
    for case in merged["cases"]:  # every worker's outputs are there
        assert (tmp_path / "xdist" / case["outputs_file"]).is_file()
