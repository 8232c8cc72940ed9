"""Wall time of one sweep vs N shards plus ``castguard merge``, and the size of a report folder per model.

    python benchmarks/bench_shards.py                                   # the bundled models, 4 shards
    python benchmarks/bench_shards.py --models bert_tiny,gpt2_tiny --goldens-dir DIR --shards 4
    python benchmarks/bench_shards.py --parallel                         # the shards at once, not one by one

Every run is a real ``pytest`` process with its own report folder and a cold cache (as on a fresh CI runner),
then the whole sweep once more on its warm cache (what a per-shard cache between nights saves). The merged
report is checked against the whole run (same cases and statuses). Prints the figures; asserts nothing about
speed. The default sweep is the repository's 12-case one (``--sweep-args`` to change it).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLED = "mnist,needs_constraints,transformer_block,if_branch,explicit_typing"


def run(command: Sequence[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(list(command), cwd=cwd, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start, done


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=BUNDLED, help=f"comma-separated --model values (default {BUNDLED})")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--parallel", action="store_true", help="start the shards at once (default: one by one)")
    parser.add_argument("--goldens-dir", default=str(REPO / "goldens"))
    parser.add_argument("--sweep-args", default="", help="extra pytest options, e.g. '--precision fp16'")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="castguard-shards-") as tmp:
        folder = Path(tmp)

        def pytest(name: str, *extra: str, cache: str | None = None) -> list[str]:
            return [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                *(a for m in models for a in ("--model", m)),
                *shlex.split(args.sweep_args),
                f"--goldens-dir={args.goldens_dir}",
                f"--report-dir={folder / name}",
                f"--cache-dir={folder / ('cache-' + (cache or name))}",
                *extra,
            ]

        whole_s, whole = run(pytest("whole"), cwd=folder, env=env)
        if not (folder / "whole" / "report.json").is_file():
            print(whole.stdout[-3000:] + whole.stderr[-3000:])
            return 1
        warm_s, _ = run(pytest("warm", cache="whole"), cwd=folder, env=env)
        names = [f"shard{k}" for k in range(1, args.shards + 1)]
        commands = [pytest(name, f"--shard={k}/{args.shards}") for k, name in enumerate(names, 1)]
        shard_s: list[float] = []
        start = time.perf_counter()
        if args.parallel:
            procs = [
                subprocess.Popen(c, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                for c in commands
            ]
            for proc in procs:
                proc.wait()
        else:
            shard_s = [run(c, cwd=folder, env=env)[0] for c in commands]
        shards_wall = time.perf_counter() - start
        merge_s, merged = run(
            [sys.executable, "-m", "harness", "merge", *names, "--out", "merged"], cwd=folder, env=env
        )
        ours = json.loads((folder / "merged" / "report.json").read_text())
        theirs = json.loads((folder / "whole" / "report.json").read_text())
        same = [(c["model"], c["case_id"], c["status"]) for c in ours["cases"]] == [
            (c["model"], c["case_id"], c["status"]) for c in theirs["cases"]
        ]
        outputs = next((folder / "merged" / "runs").iterdir()) / "outputs"
        per_model = {m.name: size(m) for m in sorted(outputs.iterdir())}
        cases = len(theirs["cases"])
        print(
            f"models: {', '.join(models)}; {cases} cases; {args.shards} shards "
            f"({'in parallel' if args.parallel else 'one after another'}); {os.cpu_count()} CPU(s)"
        )
        print(f"whole sweep, cold cache:        {whole_s:7.1f} s")
        print(f"whole sweep, warm cache:        {warm_s:7.1f} s")
        if shard_s:
            print(
                "shards, cold cache:             "
                + ", ".join(f"{s:.1f}" for s in shard_s)
                + f" s (slowest {max(shard_s):.1f} s, sum {sum(shard_s):.1f} s)"
            )
        print(f"shards wall (start to last):    {shards_wall:7.1f} s")
        print(f"castguard merge:                {merge_s:7.1f} s (exit {merged.returncode})")
        print(f"merged == whole (cases, statuses): {same}")
        print(
            f"merged report folder: {size(folder / 'merged') / 1e6:.2f} MB; report.json "
            f"{(folder / 'merged' / 'report.json').stat().st_size / 1e3:.0f} kB; one shard's artifact "
            f"{max(size(folder / n) for n in names) / 1e6:.2f} MB at most"
        )
        for name, nbytes in per_model.items():
            print(f"  outputs/{name}: {nbytes / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
