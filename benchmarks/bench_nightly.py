"""Recheck vs a full re-run of the mnist sweep (figures, not assertions).

Run: ``pytest benchmarks/bench_nightly.py -s -p no:xdist``.

* ``test_full_rerun``: wall time of ``pytest --model mnist.onnx -m "not adversarial"`` (the 24-case sweep, without
  the hypothesis search) in a fresh interpreter, cold (empty conversion cache): what re-judging with new
  tolerances costs without recheck.
* ``test_recheck_cli``: wall time of ``castguard recheck REPORT_DIR --atol 1e-2 --rtol 1e-3
  --check-error-stat median`` on that run's report folder, in a fresh interpreter (imports included).
* ``test_recheck_in_process``: :func:`harness.nightly.recheck.recheck` alone (read report.json, load 24 + 1 npz,
  compare), as the CLI spends it after its imports.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.nightly.recheck import ToleranceOverride, recheck

ROOT = Path(__file__).resolve().parents[1]
NEW_TOLERANCES = ["--atol", "1e-2", "--rtol", "1e-3", "--check-error-stat", "median"]
FIGURES: dict[str, float] = {}


def _sweep(tmp: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--model=mnist.onnx",
        "--keep-io-types=both",
        "-m",
        "not adversarial",
        f"--cache-dir={tmp / 'cache'}",
        f"--report-dir={tmp / 'report'}",
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("mnist")
    done = _sweep(tmp)
    assert done.returncode == 0, done.stdout[-2000:]
    return tmp / "report"


def test_full_rerun(benchmark: Any, tmp_path: Path) -> None:
    def cold() -> tuple[tuple[()], dict[str, Any]]:
        shutil.rmtree(tmp_path, ignore_errors=True)
        tmp_path.mkdir()
        return (), {}

    done = benchmark.pedantic(lambda: _sweep(tmp_path), setup=cold, rounds=3, iterations=1)
    assert done.returncode == 0, done.stdout[-2000:]
    if benchmark.stats is not None:
        FIGURES["rerun"] = benchmark.stats.stats.median
        print(f"\nfull re-run of the 24-case mnist sweep (cold cache): {FIGURES['rerun']:.2f} s")


def test_recheck_cli(benchmark: Any, report_dir: Path) -> None:
    command = [sys.executable, "-m", "harness", "recheck", str(report_dir), *NEW_TOLERANCES]
    done = benchmark.pedantic(
        lambda: subprocess.run(command, capture_output=True, text=True, timeout=300, check=False),
        rounds=5,
        iterations=1,
    )
    assert "24 of 24 case(s) rechecked" in done.stdout, done.stdout + done.stderr
    if benchmark.stats is not None:
        FIGURES["cli"] = benchmark.stats.stats.median
        ratio = f"; {FIGURES['rerun'] / FIGURES['cli']:.0f}x faster than the re-run" if "rerun" in FIGURES else ""
        print(f"\ncastguard recheck {' '.join(NEW_TOLERANCES)}: {FIGURES['cli']:.2f} s wall{ratio}")


def test_recheck_in_process(benchmark: Any, report_dir: Path) -> None:
    override = ToleranceOverride(atol=(("", 1e-2),), rtol=(("", 1e-3),), mode=(("", "median"),))
    result = benchmark(recheck, report_dir, override=override)
    assert result.rechecked == 24
    if benchmark.stats is not None:
        print(f"\nrecheck() of 24 cases in process: {1000 * benchmark.stats.stats.median:.1f} ms")
