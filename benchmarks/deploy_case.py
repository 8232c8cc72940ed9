"""A whole case at deploy shapes (issue 31): ``pytest --model`` on a LLaMA-style decoder, one fp16 case that fails
by overflow (a massive activation: the first RMNSorm's x*x at ``--data-max inf``) with its diagnosis, and one that
passes (``--data-max 512`` keeps the norms FP32), each in a fresh process, against one FP32 forward at the same
shape in a fresh process. Prints wall time, peak RSS and the ratios; no timed assertions.

    python benchmarks/deploy_case.py                                   # CPU: decoder 4x256 at 8x512
    python benchmarks/deploy_case.py --decoder 8x1024 --runner ort-cuda --providers cuda:0
    python benchmarks/deploy_case.py --before /work/main               # also time another checkout

The golden is written by a first run (not timed as a case: its cost is one FP32 forward plus the write). Each
timed run gets a fresh report folder and the goldens of the first run. ``--before DIR`` runs the same commands with
that checkout first on ``PYTHONPATH``.

castguard runs as a user's install does, with bytecode: its modules are compiled first (as pip does at install) and
one untimed run of each case (round 0) writes pytest's rewritten bytecode, under a ``PYTHONPYCACHEPREFIX`` in the
benchmark's temporary folder (nothing is written into the checkout), and fills the conversion cache, as a nightly
run of an unchanged model finds it. The forward's imports (onnxruntime, numpy) have their installed bytecode too.
``--no-bytecode`` times the castguard runs with ``PYTHONDONTWRITEBYTECODE=1`` instead (every run compiles castguard
and rewrites its asserts: about 1 s more per run here), as the figures before 2026-11-27 10:00 were taken.
``--cold-cache`` gives every timed case an empty conversion cache: it collects the FP32 magnitudes and converts in
its own run, as the first run on a new model does (the untimed runs are skipped; before 2026-11-27 14:00 the GPU
figures, taken with ``--no-bytecode``, were cold, and the CPU ones warm).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_shapes import _FORWARD, decoder, measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MASSIVE = 1000.0
"""Added to one embedding channel: x*x = 1e6 overflows fp16 (65504) in the first RMSNorm at data_max inf."""


def _pytest(model: Path, *, data_max: str, batch: int, seq: int, runner: str, work: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "--model",
        f"decoder={model}",
        "--input-shapes",
        f"input_ids:{batch}x{seq}",
        "--input-shapes",
        f"attention_mask:{batch}x{seq}",
        "--val-range",
        "attention_mask:[1,1]",
        "--precision",
        "fp16",
        "--data-max",
        data_max,
        "--exclude-ops",
        "none",
        "--keep-io-types",
        "true",
        "--runner",
        runner,
        "--goldens-dir",
        str(work / "goldens"),
        "--report-dir",
        str(work / "report"),
        "--cache-dir",
        str(work / "cache"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoder", default="4x256", help="LAYERSxHIDDEN of the built decoder")
    parser.add_argument("--vocab", type=int, default=8192, help="the decoder's vocabulary (its logits' last dim)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--runner", default="emulate")
    parser.add_argument("--providers", default="cpu", help="for the FP32 forward: cpu or cuda:0")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-bytecode", action="store_true", help="castguard's runs without bytecode files")
    parser.add_argument(
        "--cold-cache", action="store_true", help="each case converts in its own run (no conversion cache)"
    )
    args = parser.parse_args(argv)
    layers, hidden = (int(v) for v in args.decoder.split("x"))
    with tempfile.TemporaryDirectory(prefix="castguard-case-") as tmp:
        folder = Path(tmp) / "deploy case"
        folder.mkdir()
        model = folder / f"decoder_{args.decoder}.onnx"
        onnx.save(decoder(layers, hidden, vocab=args.vocab, massive=MASSIVE), model)
        feeds = folder / "feeds.npz"
        ids = np.random.default_rng(0).integers(0, args.vocab, (args.batch, args.seq), dtype=np.int64)
        np.savez(feeds, input_ids=ids, attention_mask=np.ones((args.batch, args.seq), np.int64))
        checkouts = {"castguard": ROOT, **({"before": args.before} if args.before else {})}
        rows: dict[str, list[tuple[float, float, str]]] = {}
        for _ in range(args.rounds):
            rows.setdefault("forward", []).append(
                measure([sys.executable, "-c", _FORWARD, str(model), str(feeds), args.providers])
            )
            _progress("forward", rows)
            for label, checkout in checkouts.items():
                env = _env(checkout, pycache=None if args.no_bytecode else folder / "pycache")
                work = folder / label
                shutil.rmtree(work, ignore_errors=True)
                common = {"batch": args.batch, "seq": args.seq, "runner": args.runner, "work": work}
                golden = [*_pytest(model, data_max="inf", **common), "-k", "test_fp32_golden"]  # type: ignore[arg-type]
                rows.setdefault(f"{label} golden", []).append(measure(golden, cwd=folder, env=env))
                _progress(f"{label} golden", rows)
                if not args.cold_cache:  # as a user's earlier runs left them (every round: the folder was wiped
                    for data_max in ("inf", "512"):  # above): bytecode, the conversions and magnitudes cached
                        measure(_pytest(model, data_max=data_max, **common), cwd=folder, env=env)  # type: ignore[arg-type]
                for case, data_max in (("failing", "inf"), ("passing", "512")):
                    shutil.rmtree(work / "report", ignore_errors=True)
                    if args.cold_cache:  # the case converts (and collects the magnitudes) in its own run
                        shutil.rmtree(work / "cache", ignore_errors=True)
                    rows.setdefault(f"{label} {case}", []).append(
                        measure(_pytest(model, data_max=data_max, **common), cwd=folder, env=env)  # type: ignore[arg-type]
                    )
                    _progress(f"{label} {case}", rows)
    cache = "cold conversion cache" if args.cold_cache else "conversion cache warm"
    label = f"decoder {args.decoder} at {args.batch}x{args.seq}, runner {args.runner}, {cache}"
    return _print(rows, label=label, out=args.json)


def _env(checkout: Path, *, pycache: Path | None) -> dict[str, str]:
    """castguard's runs' environment: ``checkout`` first on the path; bytecode under ``pycache`` (compiled first,
    as an install does), or none at all."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "harness")], env=env, check=True)
    return env


def _progress(step: str, rows: dict[str, list[tuple[float, float, str]]]) -> None:
    wall, rss, error = rows[step][-1]
    sys.stdout.write(f"[deploy_case] {step}: {wall:.2f} s, {rss:.0f} MB{' (exit != 0)' if error else ''}\n")
    sys.stdout.flush()


def _print(rows: dict[str, list[tuple[float, float, str]]], *, label: str, out: Path | None) -> int:
    forward_wall = statistics.median(r[0] for r in rows["forward"])
    forward_rss = max(r[1] for r in rows["forward"])
    table = {"model": label}
    sys.stdout.write(f"\n{label}\n| step | wall s | peak RSS MB | / forward: wall, RSS |\n|---|---|---|---|\n")
    for step, values in rows.items():
        wall, rss = statistics.median(v[0] for v in values), max(v[1] for v in values)
        table[f"{step}_wall_s"], table[f"{step}_rss_mb"] = wall, rss  # type: ignore[assignment]
        sys.stdout.write(
            f"| {step} | {wall:.2f} | {rss:.0f} | {wall / forward_wall:.1f}x, {rss / forward_rss:.2f}x |\n"
        )
    if out is not None:
        out.write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
