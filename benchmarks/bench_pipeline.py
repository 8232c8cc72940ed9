"""Where a warm sweep's time goes, step by step, and how it compares with its floor (figures, not assertions).

Run: ``pytest benchmarks/bench_pipeline.py -s -p no:xdist`` (or ``python benchmarks/bench_pipeline.py``).

The sweep is the README's main command on the bundled BERT-like export, ``pytest --model bert_tiny`` (12 cases),
run once to write the golden and fill the cache, then ``ROUNDS`` more times warm, each in a fresh interpreter.

* **warm**: the median wall time of a warm run (the pytest process, start to exit);
* **floor**: pytest's start-up (``pytest --co`` of an empty folder, median) plus, for each distinct converted
  model the sweep ran (cases not reused from another case), creating one ORT CPU session of the original FP32
  model and running it once on the golden's feeds (median over ``ROUNDS``);
* **steps**: each :class:`~harness.report.Timings` field summed over the cases of the last warm report, and
  the cases' ``total_s`` (the rest of the wall time is pytest, model loading and the golden check).

Both are measured twice: **with bytecode caches**, as a user's install runs (the pytest runs write and read their
``.pyc`` files under a ``PYTHONPYCACHEPREFIX`` in the bench's temporary folder, so nothing is written into the
checkout or the environment; the first, cold run fills it), and **without** (``PYTHONDONTWRITEBYTECODE=1``, which
the project's workplace sets: every run compiles each module it imports, castguard's included, and pytest's
assertion rewriting of the plugin's modules; the figures in benchmarks/README.md before 2026-11-27 were taken so).

``CASTGUARD_BENCH_BASELINE=DIR`` (another checkout of castguard, e.g. ``git archive`` of an earlier commit) also
times that tree, put first on ``PYTHONPATH``: its warm runs and start-up runs alternate with this tree's, in the same
folder with the same cache and golden, so that both see the same load on a shared machine.

Goal (issue 25): warm <= 1.5 x floor. For context only, the bench also prints what importing numpy, onnx,
onnxruntime and ml_dtypes costs a fresh interpreter (every run that makes a session pays it; the floor's empty
folder does not) and the ratio against the floor plus that.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "bert_tiny"
ROUNDS = int(os.environ.get("CASTGUARD_BENCH_ROUNDS", "5"))
BASELINE = os.environ.get("CASTGUARD_BENCH_BASELINE")
LIBRARIES = "import numpy, onnx, onnxruntime, ml_dtypes"


def _env(pycache: Path | None) -> dict[str, str]:
    """The pytest runs' environment: bytecode written and read under ``pycache`` (None: no bytecode files)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update({"PYTHONPYCACHEPREFIX": str(pycache)} if pycache is not None else {"PYTHONDONTWRITEBYTECODE": "1"})
    return env


def _pytest(folder: Path, *args: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=env,
    )
    return time.perf_counter() - start


def _medians(folder: Path, args: tuple[str, ...], env: dict[str, str], base: dict[str, str] | None) -> list[float]:
    """The median wall time of ``ROUNDS`` runs of ``pytest ARGS`` in ``folder``, and with a baseline environment
    (``base``) the median of its runs, interleaved with these (after one run of it to fill its bytecode)."""
    if base is not None:
        _pytest(folder, *args, env=base)
    mine, theirs = [], []
    for _ in range(ROUNDS):
        mine.append(_pytest(folder, *args, env=env))
        if base is not None:
            theirs.append(_pytest(folder, *args, env=base))
    return [statistics.median(mine), *([statistics.median(theirs)] if theirs else [])]


def _session_floor(distinct: int) -> float:
    """``distinct`` x (one ORT CPU session of the FP32 model + one run on the golden feeds), median of rounds."""
    from harness.data.models import bundled_models_dir, bundled_registry
    from harness.data.onnxfile import load_model
    from harness.runners import make_runner

    path = bundled_models_dir() / MODEL / f"{MODEL}.onnx"
    model = load_model(path, weights="lazy")
    inputs = bundled_registry().default_inputs(MODEL)
    assert inputs is not None
    import numpy as np

    with np.load(inputs) as data:
        feed = {k: data[k] for k in data.files}
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        make_runner("ort", model, model_dir=path.parent).run([feed])
        times.append(time.perf_counter() - start)
    return distinct * statistics.median(times)


def _library_imports(env: dict[str, str]) -> float:
    """What importing numpy, onnx, onnxruntime and ml_dtypes adds to a fresh interpreter (median of ``ROUNDS``):
    work any run that makes a session pays, which the floor's empty folder does not."""

    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
        return time.perf_counter() - start

    once(LIBRARIES)  # their bytecode, where it is written
    bare = statistics.median(once("pass") for _ in range(ROUNDS))
    return max(0.0, statistics.median(once(LIBRARIES) for _ in range(ROUNDS)) - bare)


def measure(*, bytecode: bool = True) -> dict[str, float]:
    from harness.report import Timings, read_report

    with tempfile.TemporaryDirectory(prefix="castguard-bench-pipeline-") as tmp:
        folder, empty = Path(tmp) / "sweep", Path(tmp) / "empty"
        folder.mkdir()
        empty.mkdir()
        env = _env(Path(tmp) / "pycache" if bytecode else None)
        path = os.pathsep.join(filter(None, [BASELINE, env.get("PYTHONPATH")]))
        base = {**env, "PYTHONPATH": path} if BASELINE else None
        _pytest(folder, "--model", MODEL, env=env)  # writes the golden, fills the cache (and the bytecode)
        warm = _medians(folder, ("--model", MODEL), env, base)
        start_up = _medians(empty, ("--co",), env, base)
        libraries = _library_imports(env)
        report = read_report(folder / "castguard-report" / "report.json")
    distinct = sum(c.timings.infer_s > 0 for c in report.cases)  # run, not reused from another case
    sessions = _session_floor(distinct)
    floor = start_up[0] + sessions
    figures = {
        "cases": float(len(report.cases)),
        "distinct_models": float(distinct),
        "warm_s": warm[0],
        "pytest_start_up_s": start_up[0],
        "fp32_sessions_s": sessions,
        "floor_s": floor,
        "ratio": warm[0] / floor,
        "libraries_import_s": libraries,
        "ratio_with_libraries": warm[0] / (floor + libraries),
    }
    if BASELINE:
        figures.update(
            baseline_warm_s=warm[1], baseline_start_up_s=start_up[1], baseline_ratio=warm[1] / (start_up[1] + sessions)
        )
    for field in dataclasses.fields(Timings):
        figures[f"sum_{field.name}"] = sum(getattr(c.timings, field.name) for c in report.cases)
    return figures


def show(figures: dict[str, float], *, bytecode: bool = True) -> str:
    lines = [
        f"{MODEL}: {int(figures['cases'])} cases, {int(figures['distinct_models'])} distinct converted models, "
        + ("with bytecode caches" if bytecode else "without bytecode files (PYTHONDONTWRITEBYTECODE=1)"),
        f"  warm sweep {figures['warm_s']:.2f} s; floor {figures['floor_s']:.2f} s (pytest start-up "
        f"{figures['pytest_start_up_s']:.2f} s + FP32 sessions {figures['fp32_sessions_s']:.2f} s); "
        f"ratio {figures['ratio']:.2f}x (goal <= 1.5x)",
    ]
    lines.append(
        f"  for context, not the goal: the libraries' imports ({LIBRARIES}) take {figures['libraries_import_s']:.2f} s; "
        f"against the floor plus them, {figures['ratio_with_libraries']:.2f}x"
    )
    if "baseline_ratio" in figures:
        lines.append(
            f"  baseline {BASELINE} (interleaved): warm sweep {figures['baseline_warm_s']:.2f} s; pytest start-up "
            f"{figures['baseline_start_up_s']:.2f} s; ratio {figures['baseline_ratio']:.2f}x"
        )
    lines.append("  step timings summed over the cases (s):")
    lines += [f"    {k[4:]:<14} {v:.3f}" for k, v in figures.items() if k.startswith("sum_")]
    return "\n".join(lines)


def test_warm_sweep_vs_floor() -> None:
    for bytecode in (True, False):
        print("\n" + show(measure(bytecode=bytecode), bytecode=bytecode))


if __name__ == "__main__":
    for bytecode in (True, False):
        print(show(measure(bytecode=bytecode), bytecode=bytecode))
