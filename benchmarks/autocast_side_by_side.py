"""castguard vs ModelOpt AutoCast on the same FP32 models: Cast counts (CPU) and fp16 latency (GPU).

Two steps, because AutoCast runs here (CPU, its own venv via ``../shared/tools/run_modelopt_autocast.sh``) and
the timing needs a GPU with onnxruntime-gpu:

    python benchmarks/autocast_side_by_side.py convert --models DIR --out OUT [--precisions fp16,bf16]
        DIR holds NAME.onnx (FP32) and NAME.npz (its reference inputs). Writes OUT/NAME.cg.PREC.onnx (castguard,
        keep_io_types), OUT/NAME.ac.PREC.onnx (AutoCast, keep_io_types, same reference inputs) and
        OUT/casts.json: every Cast node in each output, castguard's and AutoCast's.
    python3 benchmarks/autocast_side_by_side.py time --dir OUT [--batches 8,32]
        times NAME.cg.fp16.onnx and NAME.ac.fp16.onnx interleaved on ORT CUDA (median of round medians,
        IOBinding) and prints castguard's speed relative to AutoCast's (> 1: castguard faster).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
AUTOCAST = REPO.parent / "shared" / "tools" / "run_modelopt_autocast.sh"


def count_casts(path: Path) -> int:
    return sum(1 for n in onnx.load(str(path), load_external_data=False).graph.node if n.op_type == "Cast")


def convert_all(models: Path, out: Path, precisions: list[str], autocast: Path) -> dict[str, Any]:
    from harness.convert import ConvertOptions, collect_magnitudes, convert
    from harness.data.onnxsave import save_model

    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, Any] = {}
    for source in sorted(models.glob("*.onnx")):
        name = source.stem
        model = onnx.load(str(source))
        feeds = dict(np.load(source.with_suffix(".npz"), allow_pickle=False))
        mags = collect_magnitudes(model, feeds=[feeds])
        row: dict[str, Any] = {"fp32_casts": count_casts(source)}
        for precision in precisions:
            result = convert(
                model, options=ConvertOptions(low_precision_type=precision, keep_io_types=True), magnitudes=mags
            )
            target = out / f"{name}.cg.{precision}.onnx"
            save_model(result.model, target)
            row[f"castguard_{precision}"] = count_casts(target)
            theirs = out / f"{name}.ac.{precision}.onnx"
            proc = subprocess.run(
                [
                    "bash",
                    str(autocast),
                    str(source),
                    str(theirs),
                    "--low_precision_type",
                    precision,
                    "--keep_io_types",
                    "--calibration_data",
                    str(source.with_suffix(".npz")),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            row[f"autocast_{precision}"] = (
                count_casts(theirs)
                if proc.returncode == 0
                else "error: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:200]
            )
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    (out / "casts.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    return rows


def time_all(folder: Path, batches: list[int]) -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from gpu_speed import cuda_call  # noqa: PLC0415 - the benchmark's own IOBinding helper

    from harness.runners.timing import TimingConfig, interleaved

    rows = []
    for ours in sorted(folder.glob("*.cg.fp16.onnx")):
        name = ours.name.removesuffix(".cg.fp16.onnx")
        theirs = folder / f"{name}.ac.fp16.onnx"
        if not theirs.exists():
            continue
        data = dict(np.load(folder / f"{name}.npz", allow_pickle=False))
        for batch in batches:
            feed = {k: np.concatenate([v] * (-(-batch // v.shape[0])))[:batch] for k, v in data.items()}
            calls = {
                label: cuda_call(onnx.load(str(path)), feed)[0]
                for label, path in (("castguard", ours), ("autocast", theirs))
            }
            result = interleaved(calls, config=TimingConfig(warmup=5, repeats=20, rounds=7))
            row = {
                "model": name,
                "batch": batch,
                "castguard_ms": round(result["castguard"].median_ms, 4),
                "autocast_ms": round(result["autocast"].median_ms, 4),
                "castguard_speed_over_autocast": result["autocast"].median_ms / result["castguard"].median_ms,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    conv = sub.add_parser("convert")
    conv.add_argument("--models", type=Path, required=True)
    conv.add_argument("--out", type=Path, required=True)
    conv.add_argument("--precisions", default="fp16,bf16")
    conv.add_argument(
        "--autocast",
        type=Path,
        default=AUTOCAST,
        help="run_modelopt_autocast.sh (default: shared/tools beside the checkout)",
    )
    tim = sub.add_parser("time")
    tim.add_argument("--dir", type=Path, required=True)
    tim.add_argument("--batches", default="8,32")
    tim.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.step == "convert":
        if not args.autocast.is_file():
            print(f"error: {args.autocast} not found; pass --autocast PATH/run_modelopt_autocast.sh")
            return 2
        convert_all(args.models, args.out, args.precisions.split(","), args.autocast)
    else:
        rows = time_all(args.dir, [int(b) for b in args.batches.split(",")])
        if args.json is not None:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
