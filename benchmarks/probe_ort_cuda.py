"""Which ops have fp16 / bf16 kernels on onnxruntime-gpu's CUDA provider? (needs a GPU and onnxruntime-gpu)

For every op below, a one-node model whose float tensors are all fp16 (opset 17) or bf16 (opset 22) is loaded
on ``CUDAExecutionProvider`` with CPU fallback off (``session.disable_cpu_ep_fallback``) and run once. An op
whose session cannot be created, or whose run fails, has no kernel there. Writes the table castguard's
``--target ort-cuda`` reads (``harness/convert/target_data/ort_cuda.json``), dated, with the onnxruntime-gpu
version and the device:

    python3 benchmarks/probe_ort_cuda.py --out harness/convert/target_data/ort_cuda.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16, BF16, I64 = TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT64
OPSET = {F16: 17, BF16: 22}
UNARY = (
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Erf",
    "Neg",
    "Abs",
    "Sqrt",
    "Log",
    "Reciprocal",
    "Floor",
    "Ceil",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Identity",
    "Sin",
    "Cos",
    "Round",
    "Sign",
    "Elu",
    "LeakyRelu",
    "Selu",
    "Mish",
    "Softsign",
    "Softmax",
    "LogSoftmax",
    "Flatten",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "IsNaN",
    "IsInf",
    "Dropout",
)
BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "MatMul", "PRelu", "Mod")
IMAGE = (
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "BatchNormalization",
    "InstanceNormalization",
    "Resize",
    "Pad",
    "LRN",
)
OTHER = (
    "Gemm",
    "LayerNormalization",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL2",
    "Reshape",
    "Transpose",
    "Concat",
    "Slice",
    "Split",
    "Squeeze",
    "Unsqueeze",
    "Gather",
    "Expand",
    "Tile",
    "Where",
    "Clip",
    "Cast",
    "CumSum",
    "Einsum",
    "TopK",
    "ArgMax",
    "Sum",
    "Mean",
    "Trilu",
    "ScatterND",
    "GatherElements",
    "DepthToSpace",
)


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _float(name: str, shape: tuple[int, ...], elem: int, rng: np.random.Generator) -> onnx.TensorProto:
    data = (np.abs(rng.standard_normal(shape)) + 0.5).astype(np.float32)
    tensor = helper.make_tensor(name, elem, shape, vals=[0] * int(np.prod(shape)))
    if elem == F16:
        tensor.raw_data = data.astype(np.float16).tobytes()
    elif elem == TensorProto.FLOAT:
        tensor.raw_data = data.tobytes()
    else:
        tensor.raw_data = (data.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    del tensor.int32_data[:]
    return tensor


def build(op: str, elem: int) -> onnx.ModelProto:  # noqa: C901 - one case per op family
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", elem, [2, 4, 8, 8])
    inits: list[onnx.TensorProto] = []
    inputs = [x]
    attrs: dict[str, object] = {}
    names = ["x"]
    out_elem = elem
    if op in BINARY:
        shape = (2, 4, 8, 8) if op != "PRelu" else (4, 1, 1)
        inits.append(_float("b", shape, elem, rng))
        names = ["x", "b"]
        out_elem = TensorProto.BOOL if op in ("Equal", "Less", "Greater") else elem
        attrs = {"fmod": 1} if op == "Mod" else {}
    elif op in UNARY:
        out_elem = TensorProto.BOOL if op in ("IsNaN", "IsInf") else elem
    elif op in ("Conv", "ConvTranspose"):
        inits.append(_float("w", (4, 4, 3, 3), elem, rng))
        names, attrs = ["x", "w"], {"pads": [1, 1, 1, 1]}
    elif op in ("MaxPool", "AveragePool"):
        attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    elif op in ("BatchNormalization", "InstanceNormalization"):
        for n in ("s", "bias", "mean", "var")[: 4 if op == "BatchNormalization" else 2]:
            inits.append(_float(n, (4,), elem, rng))
        names = ["x", *[t.name for t in inits]]
    elif op == "LayerNormalization":
        inits += [_float("s", (8,), elem, rng), _float("bias", (8,), elem, rng)]
        names = ["x", "s", "bias"]
    elif op == "Resize":
        inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
        names, attrs = ["x", "", "scales"], {"mode": "linear"}
    elif op == "Pad":
        inits.append(_i64("p", [0, 0, 1, 1, 0, 0, 1, 1]))
        names = ["x", "p"]
    elif op == "LRN":
        attrs = {"size": 3}
    elif op == "Gemm":
        x = helper.make_tensor_value_info("x", elem, [8, 16])
        inputs = [x]
        inits += [_float("w", (16, 4), elem, rng), _float("c", (4,), elem, rng)]
        names = ["x", "w", "c"]
    elif op.startswith("Reduce"):
        inits.append(_i64("axes", [1]))
        names = ["x", "axes"] if OPSET.get(elem, 22) >= 18 or op == "ReduceSum" else ["x"]
        if len(names) == 1:
            attrs = {"axes": [1]}
    elif op == "Reshape":
        inits.append(_i64("s", [2, -1]))
        names = ["x", "s"]
    elif op == "Transpose":
        attrs = {"perm": [0, 2, 3, 1]}
    elif op in ("Concat", "Sum", "Mean"):
        names, attrs = ["x", "x"], ({"axis": 1} if op == "Concat" else {})
    elif op == "Slice":
        inits += [_i64("st", [1]), _i64("en", [3]), _i64("ax", [1])]
        names = ["x", "st", "en", "ax"]
    elif op == "Split":
        inits.append(_i64("sp", [2, 2]))
        names, attrs = ["x", "sp"], {"axis": 1}
    elif op in ("Squeeze", "Unsqueeze"):
        x = helper.make_tensor_value_info("x", elem, [2, 1, 8, 8])
        inputs = [x]
        inits.append(_i64("ax", [1]))
        names = ["x", "ax"]
    elif op in ("Gather", "GatherElements"):
        inits.append(
            numpy_helper.from_array(np.zeros((2, 4, 8, 8) if op == "GatherElements" else (3,), np.int64), "idx")
        )
        names, attrs = ["x", "idx"], {"axis": 1}
    elif op in ("Expand", "Tile"):
        inits.append(_i64("s", [2, 4, 8, 8] if op == "Expand" else [1, 1, 1, 2]))
        names = ["x", "s"]
    elif op == "Where":
        inits.append(numpy_helper.from_array(np.ones((2, 4, 8, 8), bool), "c"))
        names = ["c", "x", "x"]
    elif op == "Clip":
        inits += [_float("lo", (), elem, rng), _float("hi", (), elem, rng)]
        names = ["x", "lo", "hi"]
    elif op == "Cast":
        attrs = {"to": TensorProto.FLOAT}
        out_elem = TensorProto.FLOAT
    elif op == "CumSum":
        inits.append(numpy_helper.from_array(np.array(1, np.int64), "ax"))
        names = ["x", "ax"]
    elif op == "Einsum":
        names, attrs = ["x", "x"], {"equation": "bcij,bcjk->bcik"}
    elif op == "TopK":
        inits.append(_i64("k", [2]))
        names = ["x", "k"]
    elif op == "ArgMax":
        out_elem, attrs = I64, {"axis": 1}
    elif op == "Trilu":
        pass
    elif op == "ScatterND":
        inits += [numpy_helper.from_array(np.zeros((1, 1), np.int64), "i"), _float("u", (1, 4, 8, 8), elem, rng)]
        names = ["x", "i", "u"]
    elif op == "DepthToSpace":
        attrs = {"blocksize": 2}
    outputs = ["y", "i"] if op == "TopK" else (["y", "z"] if op == "Split" else ["y"])
    node = helper.make_node(op, names, outputs, name=op.lower(), **attrs)
    out_vis = [helper.make_tensor_value_info(o, out_elem if o != "i" else I64, None) for o in outputs]
    graph = helper.make_graph([node], "probe", inputs, out_vis, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET.get(elem, OPSET[BF16]))])
    model.ir_version = 10
    return model


def probe(op: str, elem: int, *, opset: int | None = None) -> str:
    """'ok', or why the op does not run on ORT CUDA in this type (at `opset`, default the type's probe opset)."""
    import onnxruntime as ort

    try:
        model = build(op, elem)
        if opset is not None:
            model.opset_import[0].version = opset
        onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)
    except Exception as err:  # the probe model itself is invalid: report, not a kernel verdict
        return f"probe model invalid: {type(err).__name__}: {str(err)[:160]}"
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CUDAExecutionProvider"]
        )
    except Exception as err:
        return f"no session: {str(err).splitlines()[0][:200]}"
    feeds = {}
    for inp in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        data = np.abs(np.random.default_rng(1).standard_normal(shape)) + 0.5
        if elem == F16:
            feeds[inp.name] = ort.OrtValue.ortvalue_from_numpy(data.astype(np.float16))
        elif elem == TensorProto.FLOAT:
            feeds[inp.name] = ort.OrtValue.ortvalue_from_numpy(data.astype(np.float32))
        else:
            bits = (data.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            feeds[inp.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, BF16)
    try:
        session.run_with_ort_values([o.name for o in session.get_outputs()], feeds)
    except Exception as err:
        return f"run failed: {str(err).splitlines()[0][:200]}"
    return "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON table to write")
    args = parser.parse_args()
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        print("error: onnxruntime here has no CUDAExecutionProvider; install onnxruntime-gpu")
        return 2
    device = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    table: dict[str, dict[str, str]] = {"fp16": {}, "bf16": {}}
    for label, elem in (("fp16", F16), ("bf16", BF16)):
        for op in (*UNARY, *BINARY, *IMAGE, *OTHER):
            table[label][op] = probe(op, elem)
            print(f"{label} {op:22} {table[label][op]}", flush=True)
    fp32_at_bf16_opset = {
        op: probe(op, TensorProto.FLOAT, opset=OPSET[BF16])
        for op, why in table["bf16"].items()
        if why.startswith(("no session", "run failed"))
    }
    for op, why in fp32_at_bf16_opset.items():
        print(f"fp32@{OPSET[BF16]} {op:22} {why}", flush=True)
    result = {
        "target": "ort-cuda",
        "measured": datetime.date.today().isoformat(),
        "onnxruntime_gpu": ort.__version__,
        "device": device,
        "opset": {"fp16": OPSET[F16], "bf16": OPSET[BF16]},
        "method": "one-node model per op, every float tensor in the low type, CUDAExecutionProvider only with "
        "session.disable_cpu_ep_fallback=1, created and run once (benchmarks/probe_ort_cuda.py)",
        "no_kernel": {
            label: {op: why for op, why in ops.items() if why.startswith(("no session", "run failed"))}
            for label, ops in table.items()
        },
        "probe_invalid": {
            label: sorted(op for op, why in ops.items() if why.startswith("probe model invalid"))
            for label, ops in table.items()
        },
        "ok": {label: sorted(op for op, why in ops.items() if why == "ok") for label, ops in table.items()},
        "fp32_at_bf16_opset": {op: why for op, why in fp32_at_bf16_opset.items() if why != "ok"},
        "fp32_at_bf16_opset_note": f"the bf16 failures probed again in fp32 at opset {OPSET[BF16]}: an op listed here "
        "has no CUDA kernel at that opset in any type, so keeping it FP32 moves it to the "
        "CPU EP instead of making it run on the GPU",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=args.out.parent, delete=False, suffix=".tmp") as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(handle.name, args.out)
    print(f"wrote {args.out}: {sum(len(v) for v in result['no_kernel'].values())} (op, type) pairs without a kernel")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
