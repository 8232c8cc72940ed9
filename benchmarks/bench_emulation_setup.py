"""What one emulation session costs a warm sweep, against the FP32 model's (figures, not assertions).

Run: ``python benchmarks/bench_emulation_setup.py [--rounds N]``.

On the bundled BERT-like export converted to fp16 (castguard's converter, no magnitudes), the median over rounds of:
building the emulation model (:func:`harness.runners.emulate.emulation_model`: onnx shape inference and the
rounding rewrite), creating its onnxruntime CPU session as the emulate runner does, creating the FP32 model's
session the same way, and, for comparison, the emulation session with one intra-op thread (no per-session thread
pool; castguard keeps onnxruntime's default thread count, so that every run splits the work, and rounds, alike).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import onnxruntime as ort  # noqa: E402

from harness.convert import ConvertOptions, convert  # noqa: E402
from harness.data.models import bundled_models_dir  # noqa: E402
from harness.data.onnxfile import load_model  # noqa: E402
from harness.runners.emulate import emulation_model  # noqa: E402
from harness.runners.ort import create_session  # noqa: E402

CPU = ("CPUExecutionProvider",)


def _median(make: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        make()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    path = bundled_models_dir() / "bert_tiny" / "bert_tiny.onnx"
    model = load_model(path)
    inf = float("inf")
    options = ConvertOptions(low_precision_type="fp16", data_max=inf, init_max=inf)
    converted = convert(model, options=options, magnitudes=None).model
    emulated = emulation_model(converted)
    data = emulated.SerializeToString()

    def one_thread() -> object:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        return ort.InferenceSession(data, so, providers=list(CPU))

    def session(of: object) -> Callable[[], object]:
        return lambda: create_session(of, providers=CPU, runner="bench", spinning=False)  # type: ignore[arg-type]

    figures = {
        "emulation model built": _median(lambda: emulation_model(converted), args.rounds),
        "emulation session created": _median(session(emulated), args.rounds),
        "FP32 session created": _median(session(model), args.rounds),
        "emulation session, one intra-op thread": _median(one_thread, args.rounds),
    }
    print(f"bert_tiny fp16: {len(emulated.graph.node)} emulation nodes, {len(model.graph.node)} FP32 nodes")
    for name, seconds in figures.items():
        print(f"  {name:<40} {seconds * 1000:6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
