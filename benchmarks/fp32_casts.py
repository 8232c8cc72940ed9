"""What respecting the author's FP32 casts costs: Cast nodes, FLOP share and emulate error, default vs ignored.

    .venv/bin/python benchmarks/fp32_casts.py MODEL.onnx [MODEL.onnx ...] [--input_shapes input_ids:1x128]

Each model is converted twice, with the defaults (an identity ``Cast(to=FLOAT)`` holds its readers FP32) and with
``respect_fp32_casts=False`` (``--ignore_fp32_casts``), both with the converter's default reference data. Printed
per model and mode: Cast nodes in the output (the author's and the converter's), Casts the converter inserted,
the low-precision FLOP share, and the largest normalized error ``max|y - gold| / max|gold|`` over the outputs on
the ``emulate`` runner (numpy, real fp16 rounding) against ORT FP32, on one seeded random feed at the same sizes.
Figures, not assertions (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import onnx

from harness.convert import ConvertOptions, ReferenceData, convert_path
from harness.convert.calibration import random_feeds
from harness.data.feeds import cast_feeds, input_specs
from harness.data.recipes import parse_input_shapes
from harness.data.sizing import DYNAMIC_DEFAULT
from harness.runners import make_runner
from harness.tune.bound import normalized_errors
from harness.tune.oracle import fp32_outputs


def measure(path: Path, *, input_shapes: dict[str, tuple[int, ...]]) -> list[str]:
    model = onnx.load(path)
    feeds = random_feeds(model, seed=0, input_shapes=input_shapes, dynamic_default=DYNAMIC_DEFAULT)[0]
    gold = fp32_outputs(model, feeds, model_dir=path.parent)
    user_casts = sum(1 for n in model.graph.node if n.op_type == "Cast")
    lines = [f"{path.name}: {len(model.graph.node)} nodes, {user_casts} Cast nodes in the FP32 export"]
    for respect in (True, False):
        result = convert_path(
            path, options=ConvertOptions(respect_fp32_casts=respect), reference=ReferenceData(input_shapes=input_shapes)
        )
        casts = sum(1 for n in result.model.graph.node if n.op_type == "Cast")
        got = (
            make_runner("emulate", result.model, model_dir=path.parent)
            .run(cast_feeds(feeds, input_specs(result.model)))
            .outputs
        )
        error = max(normalized_errors(got, gold).values())
        mode = "default (respect)" if respect else "--ignore_fp32_casts"
        lines.append(
            f"  {mode:20s} Cast nodes {casts:4d} (inserted {result.cast_count:3d}), FP32 nodes "
            f"{len(result.high_nodes):4d}, fp16 FLOP share {result.lowp_flop_share:.4f}, emulate max "
            f"normalized error {error:.3e}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--input_shapes", default="")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    shapes = dict(parse_input_shapes(args.input_shapes)) if args.input_shapes else {}
    for path in args.models:
        print("\n".join(measure(path, input_shapes=shapes)))


if __name__ == "__main__":
    main()
