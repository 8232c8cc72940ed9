"""What castguard costs a pytest run that does not use it (issue 34 item 2): figures, not assertions.

    python benchmarks/bench_startup.py [--rounds 7] [--checkout DIR]

A project with one trivial test, in a fresh temporary folder, run with ``python -m pytest -q`` in fresh processes:
with castguard's plugin loaded (as installed) and with ``-p no:castguard``, rounds interleaved so that machine load
hits both alike. Prints the median wall time of each, the difference and the goal (<= 0.3 s). ``--checkout DIR``
measures another castguard checkout (put first on PYTHONPATH; e.g. an old commit unpacked with ``git archive``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 0.3
REPO = Path(__file__).resolve().parents[1]


def one_run(project: Path, env: dict[str, str], *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--checkout", type=Path, default=REPO, help="castguard checkout to measure (default: this)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.checkout.resolve())}
    env.pop("PYTEST_ADDOPTS", None)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "one test"
        project.mkdir()
        (project / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        one_run(project, env)  # warm the file cache (and __pycache__) for both
        with_cg, without = [], []
        for _ in range(args.rounds):
            with_cg.append(one_run(project, env))
            without.append(one_run(project, env, "-p", "no:castguard"))
    on, off = statistics.median(with_cg), statistics.median(without)
    print(f"checkout: {args.checkout.resolve()}  rounds: {args.rounds}  python: {sys.version.split()[0]}")
    print(f"pytest start-up, one trivial test, with castguard:   {on:.2f} s (median)")
    print(f"pytest start-up, one trivial test, -p no:castguard:  {off:.2f} s (median)")
    print(f"castguard's cost: {on - off:+.2f} s  (goal <= {GOAL_S} s: {'met' if on - off <= GOAL_S else 'NOT met'})")


if __name__ == "__main__":
    main()
