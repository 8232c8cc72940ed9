"""What the sweep costs on the bundled mnist (figures, not assertions).

Run: ``pytest benchmarks/bench_sweep.py -s -p no:xdist`` (figures are printed and stored in the benchmark
JSON's ``extra_info``).

* ``test_sweep_vs_one_case``: the default 24-case sweep, cold (empty cache), through the same domain code
  as the suite (:class:`harness.pipeline.session.AccuracySession`), against one case alone (magnitudes + one
  conversion + one emulate run + compare). Target: the sweep <= 3x one case, because the magnitudes run
  is shared and conversions are cheap after it.
* ``test_sweep_warm``: the 24 cases again with nothing changed (every magnitude and conversion from the cache).
* ``test_readme_main_command``: wall time of the README's main command, ``pytest --model mnist.onnx``, in a
  fresh interpreter from the repository root: cold (empty cache and report folder) and warm (second run).
  Targets on 2 cores: <= 60 s cold, <= 10 s warm. ``--cache-dir``/``--report-dir`` point at a temporary
  folder so that "cold" is really cold without touching the repository's own cache.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.config import HarnessConfig
from harness.data.models import bundled_models_dir
from harness.pipeline.session import AccuracySession
from harness.sweep import SweepSpec

ROOT = Path(__file__).resolve().parents[1]


GRID_24 = SweepSpec(keep_io_types=(False, True))  # the pre-issue-9 default grid, so the figures stay comparable


def _session(tmp: Path, *, spec: SweepSpec = GRID_24) -> AccuracySession:
    config = HarnessConfig(
        models=("mnist",), goldens_dir=ROOT / "goldens", report_dir=tmp / "report", cache_dir=tmp / "cache", sweep=spec
    )
    return AccuracySession.open(config, bundled_dir=bundled_models_dir())


def _run_all(session: AccuracySession) -> list[str]:
    statuses = [session.check_low_precision(case).status for case in session.cases]
    assert len(statuses) == len(session.cases)
    return statuses


def _cold(tmp: Path, spec: SweepSpec = GRID_24) -> Callable[[], tuple[tuple[AccuracySession], dict[str, Any]]]:
    def setup() -> tuple[tuple[AccuracySession], dict[str, Any]]:
        shutil.rmtree(tmp, ignore_errors=True)
        return (_session(tmp, spec=spec),), {}

    return setup


def _median_seconds(action: Callable[[], object], setup: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        setup()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_sweep_vs_one_case(benchmark: Any, tmp_path: Path) -> None:
    one_spec = SweepSpec(
        precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1], keep_io_types=(False,)
    )
    holder: dict[str, AccuracySession] = {}

    def fresh_one() -> None:
        holder["s"] = _cold(tmp_path / "one", one_spec)()[0][0]

    one_s = _median_seconds(lambda: _run_all(holder["s"]), fresh_one, rounds=5)
    statuses = benchmark.pedantic(_run_all, setup=_cold(tmp_path / "sweep"), rounds=5, iterations=1)
    assert statuses.count("pass") == 24
    if benchmark.stats is not None:
        sweep_s = benchmark.stats.stats.median
        benchmark.extra_info.update(one_case_s=one_s, sweep_24_s=sweep_s, ratio=sweep_s / one_s)
        print(
            f"\none case (magnitudes + convert + emulate + compare), cold: {one_s:.3f} s; 24-case sweep, cold: "
            f"{sweep_s:.3f} s; ratio {sweep_s / one_s:.2f}x (target <= 3x)"
        )


def test_sweep_warm(benchmark: Any, tmp_path: Path) -> None:
    _run_all(_session(tmp_path))  # fill the cache once

    def setup() -> tuple[tuple[AccuracySession], dict[str, Any]]:
        return (_session(tmp_path),), {}

    statuses = benchmark.pedantic(_run_all, setup=setup, rounds=5, iterations=1)
    assert statuses.count("pass") == 24
    if benchmark.stats is not None:
        print(f"\n24-case sweep, warm cache: {benchmark.stats.stats.median:.3f} s")


@pytest.mark.parametrize("state", ["cold", "warm"])
def test_readme_main_command(benchmark: Any, tmp_path: Path, state: str) -> None:
    # --option=value: pytest guesses its rootdir from every separate argument that names an existing path
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--model",
        "mnist.onnx",
        "--keep-io-types=both",
        "-q",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--report-dir={tmp_path / 'report'}",
    ]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        if state == "cold":
            shutil.rmtree(tmp_path / "cache", ignore_errors=True)
            shutil.rmtree(tmp_path / "report", ignore_errors=True)
        else:
            run()
        return (), {}

    done = benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    assert done.returncode == 0 and "castguard: 24 cases: 24 pass" in done.stdout, done.stdout[-2000:]
    assert (tmp_path / "report" / "report.html").is_file()
    if benchmark.stats is not None:
        target = 60 if state == "cold" else 10
        print(f"\n`pytest --model mnist.onnx` {state}: {benchmark.stats.stats.median:.2f} s (target <= {target} s)")
