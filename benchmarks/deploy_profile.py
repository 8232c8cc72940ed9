"""The divergence profile alone at deploy shape (issue 31): the in-graph side-by-side comparison against every
tensor of both models marked as a graph output (the way before), each in a fresh process, on a LLaMA-style decoder
whose fp16 conversion at data_max inf overflows (a massive activation). Prints wall, peak RSS, the number of
tensors beyond tolerance and the cause, which must be the same both ways. No timed assertions.

    python benchmarks/deploy_profile.py                        # decoder 4x256 at 8x512, both ways
    python benchmarks/deploy_profile.py --way divergence_profile --decoder 8x1024
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def one(way: str, size: str, batch: int, seq: int) -> None:
    from deploy_shapes import decoder

    from harness.convert import ConvertOptions, convert
    from harness.diagnose import profile
    from harness.diagnose.failure import cause_of
    from harness.judge.tolerances import TolerancePolicy

    layers, hidden = (int(v) for v in size.split("x"))
    model = decoder(layers, hidden, massive=1000.0)
    rng = np.random.default_rng(0)
    feeds = [
        {
            "input_ids": rng.integers(0, 8192, (batch, seq), dtype=np.int64),
            "attention_mask": np.ones((batch, seq), np.int64),
        }
    ]
    converted = convert(model, options=ConvertOptions(data_max=float("inf")), magnitudes=None).model
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    found = getattr(profile, way)(
        profile.ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy())
    )
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cause = cause_of(model, found)
    failing = sum(not r.passed for r in found.rows)
    print(
        f"{way}: {wall:.1f} s, peak RSS {peak:.0f} MB (before the profile {before:.0f} MB), {failing} of "
        f"{len(found.rows)} tensors beyond tolerance, cause {cause.tensor if cause else None}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoder", default="4x256")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--way", default="divergence_profile,marked_profile")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.decoder, args.batch, args.seq)
        return 0
    for way in args.way.split(","):
        cmd = [sys.executable, __file__, "--one", way, "--decoder", args.decoder]
        subprocess.run([*cmd, "--batch", str(args.batch), "--seq", str(args.seq)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
