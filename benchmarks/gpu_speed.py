"""fp16/bf16 speed and error on a real GPU (ORT CUDA) next to castguard's emulate oracle. Needs a GPU, torch, timm,
transformers and onnxruntime-gpu (see ``../shared/reference/gpu.md`` for carrying the wheel).

For each model (timm / transformers exports, random init, dynamic batch): convert with castguard in fp16
(``--target any``) and bf16 (``--target ort-cuda``), keep_io_types; count the Casts; time FP32, fp16 and bf16 on
ORT CUDA *interleaved* in rounds (``harness.runners.timing.interleaved``: median of the per-round medians), inputs
and outputs bound on the GPU (IOBinding), at each batch; and at the first batch list the float nodes ORT put on the CPU EP (``OrtCudaRunner.profile_placement``) and
compare the error
``max|y - gold| / max|gold|`` (gold: ORT CPU FP32) on the GPU and on castguard's ``emulate`` runner.

    python3 benchmarks/gpu_speed.py --out DIR [--batches 8,32] [--models resnet18,vit_tiny_patch16_224]

Prints one row per model and batch and writes ``DIR/gpu_speed.json``. Not a pytest test (no GPU in CI);
``docs/gpu-fidelity.md`` records a run with the command and the date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.convert import ConvertOptions, collect_magnitudes, convert  # noqa: E402
from harness.runners import make_runner  # noqa: E402
from harness.runners.ort_cuda import OrtCudaRunner  # noqa: E402
from harness.runners.timing import TimingConfig, interleaved, speedup  # noqa: E402

IMAGE_MODELS = (
    "resnet18",
    "resnet50",
    "mobilenetv3_small_100",
    "efficientnet_b0",
    "vit_tiny_patch16_224",
    "vit_base_patch16_224",
    "convnext_atto",
)
TEXT_MODELS = ("bert_4x256", "bert_base", "gpt2_4x256")
BUNDLED = {"mnist": REPO / "test_models" / "mnist"}  # fixed batch 1: timed at batch 1 only
SEQ = 128


def _text_module(name: str) -> Any:
    import torch
    import transformers

    if name.startswith("bert"):
        config = (
            transformers.BertConfig()
            if name == "bert_base"
            else transformers.BertConfig(
                hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
            )
        )
        inner = transformers.BertModel(config)
    else:
        inner = transformers.GPT2Model(transformers.GPT2Config(n_embd=256, n_layer=4, n_head=4))

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, use_cache=False).last_hidden_state

    return LastHidden()


def export(name: str, path: Path, batch: int) -> tuple[str, np.ndarray]:
    if name in BUNDLED:
        folder = BUNDLED[name]
        path.write_bytes((folder / f"{name}.onnx").read_bytes())
        digits = np.load(folder / "digits.npz", allow_pickle=False)
        key = next(iter(digits.files))
        return key, digits[key][:1]
    import timm
    import torch

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if name in IMAGE_MODELS:
        module, input_name = timm.create_model(name, pretrained=False), "x"
        data = rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)
    else:
        module, input_name = _text_module(name), "input_ids"
        data = rng.integers(0, 1000, (batch, SEQ)).astype(np.int64)
    module.eval()
    args = (torch.from_numpy(data),)
    with torch.no_grad():
        try:
            torch.onnx.export(
                module,
                args,
                str(path),
                input_names=[input_name],
                opset_version=17,
                dynamic_axes={input_name: {0: "batch"}},
                dynamo=False,
            )
        except Exception as exc:  # e.g. GPT-2's aten::diff: the dynamo exporter handles it
            print(f"{name}: legacy export failed ({type(exc).__name__}), trying dynamo=True")
            torch.onnx.export(
                module,
                args,
                str(path),
                input_names=[input_name],
                opset_version=18,
                dynamic_axes={input_name: {0: "batch"}},
                dynamo=True,
                external_data=False,
            )
    return input_name, data


def feed_for(input_name: str, data: np.ndarray, batch: int) -> dict[str, np.ndarray]:
    reps = -(-batch // data.shape[0])
    return {input_name: np.concatenate([data] * reps)[:batch]}


def rel_err(got: np.ndarray, gold: np.ndarray) -> float:
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(gold, np.float64))
    scale = float(np.max(np.abs(gold))) or 1.0
    return float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))) / scale


def cuda_call(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> tuple[Any, Any]:
    """(timed call, outputs getter) for ORT CUDA with the inputs and outputs bound on the GPU."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), sess_options=options, providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    binding = session.io_binding()
    for name, value in feed.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0))
    for out in session.get_outputs():
        binding.bind_output(out.name, "cuda")

    def call() -> None:
        session.run_with_iobinding(binding)

    def outputs() -> list[np.ndarray]:
        call()
        return [v.numpy() for v in binding.get_outputs()]

    return call, outputs


def count_casts(model: onnx.ModelProto) -> int:
    return sum(1 for n in model.graph.node if n.op_type == "Cast")


def save_structure(model: onnx.ModelProto, folder: Path, name: str) -> None:
    """The graph without its weights (external-data stubs): small enough to carry back for Cast counting."""
    light = onnx.ModelProto()
    light.CopyFrom(model)
    for tensor in light.graph.initializer:
        if len(tensor.raw_data) > 256:
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
            tensor.external_data.add(key="location", value=f"{name}.weights-not-saved")
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(light, str(folder / f"{name}.onnx"))


def measure(
    name: str, tmp: Path, batches: list[int], timing: TimingConfig, structures: Path | None = None
) -> list[dict[str, Any]]:
    import onnxruntime as ort

    path = tmp / f"{name}.onnx"
    input_name, data = export(name, path, batches[0])
    model = onnx.load(str(path))
    if name in BUNDLED:
        batches = [1]
    if structures is not None:
        save_structure(model, structures, name)
    feed0 = feed_for(input_name, data, batches[0])
    mags = collect_magnitudes(model, feeds=[feed0])
    variants: dict[str, onnx.ModelProto] = {"fp32": model}
    info: dict[str, Any] = {"model": name, "fp32_casts": count_casts(model)}
    for precision, target in (("fp16", "any"), ("bf16", "ort-cuda")):
        options = ConvertOptions(low_precision_type=precision, keep_io_types=True, target=target)
        start = time.perf_counter()
        result = convert(model, options=options, magnitudes=mags)
        variants[precision] = result.model
        info[f"{precision}_casts"] = count_casts(result.model)
        info[f"{precision}_inserted_casts"] = result.cast_count
        info[f"{precision}_lowp_flop_share"] = round(result.lowp_flop_share, 4)
        info[f"{precision}_convert_s"] = round(time.perf_counter() - start, 2)
    rows = []
    gold = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed0)[0]
    for batch in [1] if name in BUNDLED else batches:
        row = {**info, "batch": batch}
        feed = feed_for(input_name, data, batch)
        calls = {}
        for label, variant in variants.items():
            try:
                calls[label], outputs = cuda_call(variant, feed)
                if batch == batches[0]:
                    row[f"{label}_cpu_float_nodes"] = OrtCudaRunner(variant).profile_placement(feed)[:10]
                if batch == batches[0] and label != "fp32":
                    row[f"{label}_gpu_err"] = rel_err(outputs()[0], gold)
                    emulated = make_runner("emulate", variant).run([feed]).outputs[0]
                    row[f"{label}_emulate_err"] = rel_err(next(iter(emulated.values())), gold)
                    row[f"{label}_emulate_over_gpu"] = row[f"{label}_emulate_err"] / max(row[f"{label}_gpu_err"], 1e-30)
            except Exception as exc:  # a measurement script: record why and go on
                row[f"{label}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        latencies = interleaved(calls, config=timing)
        for label, latency in latencies.items():
            row[f"{label}_ms"] = round(latency.median_ms, 4)
            row[f"{label}_spread_ms"] = round(latency.spread_ms, 4)
        for label in ("fp16", "bf16"):
            row[f"{label}_speedup"] = speedup(row.get("fp32_ms"), row.get(f"{label}_ms"))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batches", default="8,32")
    parser.add_argument("--models", default=",".join((*IMAGE_MODELS, *TEXT_MODELS)))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--structures", type=Path, default=None, help="also save each export without weights here")
    args = parser.parse_args()
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        print("error: onnxruntime here has no CUDAExecutionProvider; install onnxruntime-gpu")
        return 2
    batches = [int(b) for b in args.batches.split(",")]
    timing = TimingConfig(warmup=5, repeats=args.repeats, rounds=args.rounds)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            try:
                rows.extend(measure(name, Path(tmp), batches, timing, args.structures))
            except Exception:
                print(f"{name}: failed")
                traceback.print_exc()
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": datetime.date.today().isoformat(),
        "onnxruntime": ort.__version__,
        "batches": batches,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "command": " ".join(sys.argv),
    }
    (args.out / "gpu_speed.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print("| model | batch | Casts fp16 / bf16 | fp32 ms | fp16 speedup | bf16 speedup | err emulate/GPU fp16 | bf16 |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:

        def fmt(key: str, spec: str = ".2f") -> str:
            value = row.get(key)
            return "-" if value is None else format(value, spec)

        print(
            f"| {row['model']} | {row['batch']} | {row['fp16_casts']} / {row['bf16_casts']} | {fmt('fp32_ms', '.3f')} "
            f"| {fmt('fp16_speedup')}x | {fmt('bf16_speedup')}x | {fmt('fp16_emulate_over_gpu')} "
            f"| {fmt('bf16_emulate_over_gpu')} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
