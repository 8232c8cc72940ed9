"""Which ops does TensorRT build in fp16 / bf16? Parsed and built ahead of time on the CPU, no GPU needed.

For every op of ``probe_ort_cuda.py`` (the same one-node models), per low type and opset, TensorRT's ONNX parser
parses the model into a strongly typed network and the builder builds a serialized engine. TensorRT-RTX
(``tensorrt_rtx_bindings``, ``pip install "castguard[trt]"``) builds on a machine with no GPU; full TensorRT
(``tensorrt``) is used when it is installed. An op that the parser refuses or that does not build has no kernel
in that type: ``--target tensorrt`` keeps it FP32. Writes the table castguard reads
(``harness/convert/target_data/tensorrt.json``), dated, with the TensorRT version:

    python benchmarks/probe_tensorrt.py --out harness/convert/target_data/tensorrt.json

Measured on this project's machines: 90 ops x (fp16, bf16) x opset (17, 22), about a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_ort_cuda import BINARY, IMAGE, OTHER, UNARY, build  # noqa: E402 - the same one-node models

LOW = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
OPSETS = (17, 22)


def import_tensorrt() -> Any:
    """Full TensorRT when installed, else TensorRT-RTX's bindings (the TensorRT API, strongly typed only)."""
    try:
        import tensorrt

        return tensorrt
    except ImportError:
        import tensorrt_rtx_bindings

        return tensorrt_rtx_bindings


def probe(trt: Any, op: str, elem: int, opset: int) -> str:
    """'ok', 'probe model invalid: ...' (not valid ONNX in this type and opset), 'parse: ...' or 'build: ...'."""
    try:
        model = build(op, elem)
        model.opset_import[0].version = opset
        onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)
    except Exception as err:  # noqa: BLE001 - the probe model itself is invalid: not a TensorRT verdict
        return f"probe model invalid: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
    logger = _recorder(trt)
    builder = trt.Builder(logger)
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model.SerializeToString()):
        errors = [str(parser.get_error(i).desc()) for i in range(parser.num_errors)]
        return "parse: " + _short(" | ".join(errors))
    config = builder.create_builder_config()
    if hasattr(trt.BuilderFlag, "TF32"):
        config.clear_flag(trt.BuilderFlag.TF32)
    try:
        plan = builder.build_serialized_network(network, config)
    except Exception as err:  # noqa: BLE001 - some builds raise instead of returning None
        return f"build: {str(err).splitlines()[0][:300]}"
    return "ok" if plan is not None else "build: " + (_short(" | ".join(logger.errors)) or "no engine")


def _short(message: str) -> str:
    """TensorRT's reason without the assertion's source text or Myelin's tensor dump."""
    if "Assertion failed:" in message:
        message = message.rsplit("): ", 1)[-1]
    return message.split(" for operation:", 1)[0].strip()[:300]


def _recorder(trt: Any) -> Any:
    """A TensorRT logger that keeps its error messages (the build's reason) instead of printing them."""

    class Recorder(trt.ILogger):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity in (trt.ILogger.Severity.ERROR, trt.ILogger.Severity.INTERNAL_ERROR):
                self.errors.append(msg.strip())

    return Recorder()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON table to write")
    args = parser.parse_args()
    trt = import_tensorrt()
    start = time.perf_counter()
    results: dict[str, dict[str, dict[str, str]]] = {label: {} for label in LOW}
    for label, elem in LOW.items():
        for opset in OPSETS:
            for op in (*UNARY, *BINARY, *IMAGE, *OTHER):
                verdict = probe(trt, op, elem, opset)
                results[label].setdefault(op, {})[str(opset)] = verdict
                print(f"{label} opset {opset} {op:22} {verdict}", flush=True)
    seconds = time.perf_counter() - start

    def fails(verdict: str) -> bool:
        return verdict.startswith(("parse:", "build:"))

    # An op has no kernel in a type when it fails at every opset where its probe model is valid ONNX.
    no_kernel = {
        label: {
            op: "; ".join(f"opset {o}: {v}" for o, v in by_opset.items() if fails(v))
            for op, by_opset in ops.items()
            if any(fails(v) for v in by_opset.values())
            and all(fails(v) or v.startswith("probe model invalid") for v in by_opset.values())
        }
        for label, ops in results.items()
    }
    module = trt.__name__
    result = {
        "target": "tensorrt",
        "measured": datetime.date.today().isoformat(),
        "tensorrt": f"{module} {trt.__version__}",
        "source": f"probed {datetime.date.today().isoformat()}, {module} {trt.__version__} (parse + build on the CPU)",
        "method": "one-node model per op (benchmarks/probe_ort_cuda.py's), every float tensor in the low type, at "
        f"opsets {', '.join(map(str, OPSETS))}: OnnxParser into a STRONGLY_TYPED network, then "
        "build_serialized_network with TF32 off and no GPU (benchmarks/probe_tensorrt.py)",
        "seconds": round(seconds, 1),
        "no_kernel": no_kernel,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=args.out.parent, delete=False, suffix=".tmp") as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(handle.name, args.out)
    print(
        f"wrote {args.out} in {seconds:.0f} s: "
        + "; ".join(f"{label}: {', '.join(sorted(ops)) or 'none'}" for label, ops in no_kernel.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
