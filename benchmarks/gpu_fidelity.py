"""How faithfully does the ``emulate`` runner track a real GPU? (needs a GPU and onnxruntime-gpu)

For each model (timm / transformers exports with random init, plus the bundled models), convert it with
castguard's converter (fp16 and bf16, keep_io_types, default thresholds), then measure the error
``max|y - gold| / max|gold|`` against the ORT CPU FP32 golden on three executors:

* ``gpu``      onnxruntime CUDAExecutionProvider running the converted model (real fp16/bf16 kernels);
* ``emulate``  castguard's CPU oracle (fp32 compute, every fp16/bf16 tensor rounded through a Cast pair);
* ``ort_cpu``  plain onnxruntime CPU on the converted model (fp16 only; it computes in fp32).

Prints one row per model/precision with the ratio emulate/gpu, and writes ``fidelity.json`` to ``--out``.
Not a pytest test (no GPU in CI); ``docs/gpu-fidelity.md`` records a run and the command used.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.convert import ConvertOptions, collect_magnitudes, convert  # noqa: E402
from harness.runners import make_runner  # noqa: E402


def _export(module, args: tuple, path: Path, names: list[str]) -> None:
    import torch

    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, args, str(path), input_names=names, opset_version=17, dynamo=False)


class _LastHidden:
    """Wrap a transformers model so tracing sees one positional input and one tensor output."""

    @staticmethod
    def wrap(model):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = model

            def forward(self, input_ids):
                return self.inner(input_ids=input_ids, use_cache=False).last_hidden_state

        return Wrapped()


def _torch_models(tmp: Path) -> dict[str, tuple[Path, dict[str, np.ndarray]]]:
    import timm
    import torch
    import transformers

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    image = rng.standard_normal((8, 3, 224, 224)).astype(np.float32)
    ids = rng.integers(0, 1000, (4, 128)).astype(np.int64)
    builders = {
        name: (lambda n=name: timm.create_model(n, pretrained=False), image, "x")
        for name in ("resnet18", "mobilenetv3_small_100", "vit_tiny_patch16_224", "convnext_atto")
    }
    builders["bert_4x256"] = (
        lambda: _LastHidden.wrap(
            transformers.BertModel(
                transformers.BertConfig(
                    hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
                )
            )
        ),
        ids,
        "input_ids",
    )
    builders["gpt2_4x256"] = (
        lambda: _LastHidden.wrap(transformers.GPT2Model(transformers.GPT2Config(n_embd=256, n_layer=4, n_head=4))),
        ids,
        "input_ids",
    )
    found: dict[str, tuple[Path, dict[str, np.ndarray]]] = {}
    for name, (build, data, input_name) in builders.items():
        path = tmp / f"{name}.onnx"
        try:
            _export(build(), (torch.from_numpy(data),), path, [input_name])
        except Exception as exc:  # a measurement script: report the model and go on
            print(f"export of {name} failed: {type(exc).__name__}: {exc}")
            continue
        found[name] = (path, {input_name: data})
    return found


def _bundled() -> dict[str, tuple[Path, dict[str, np.ndarray]]]:
    digits = np.load(REPO / "test_models/mnist/digits.npz", allow_pickle=False)["Input3"]
    x = np.linspace(1.0, 2.0, 8, dtype=np.float32).reshape(1, 8)
    return {
        "mnist": (REPO / "test_models/mnist/mnist.onnx", {"Input3": digits[:1]}),
        "needs_constraints_dmax_inf": (REPO / "test_models/needs_constraints/needs_constraints.onnx", {"x": x}),
    }


def _rel_err(got: dict[str, np.ndarray], gold: dict[str, np.ndarray]) -> float:
    worst = 0.0
    for name, ref in gold.items():
        ref64 = np.asarray(ref, dtype=np.float64)
        diff = np.abs(np.asarray(got[name]).astype(np.float64) - ref64)
        scale = float(np.max(np.abs(ref64))) or 1.0
        worst = max(worst, float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))) / scale)
    return worst


def _ort(model: onnx.ModelProto, feed: dict[str, np.ndarray], provider: str) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=[provider])
    if sess.get_providers()[0] != provider:
        raise RuntimeError(f"{provider} is not available (session got {sess.get_providers()})")
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))


def measure(name: str, path: Path, feed: dict[str, np.ndarray]) -> list[dict]:
    model = onnx.load(str(path))
    gold = _ort(model, feed, "CPUExecutionProvider")
    mags = collect_magnitudes(model, feeds=[feed])
    rows = []
    for precision in ("fp16", "bf16"):
        data_max = float("inf") if name.endswith("dmax_inf") else 512.0
        options = ConvertOptions(low_precision_type=precision, keep_io_types=True, data_max=data_max)
        row: dict = {"model": name, "precision": precision}
        try:
            t0 = time.perf_counter()
            result = convert(model, options=options, magnitudes=mags)
            row.update(convert_s=round(time.perf_counter() - t0, 3), lowp_flop_share=result.lowp_flop_share)
        except Exception as exc:  # a measurement script: record and go on
            row["convert_error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            continue
        for label, fn in (
            ("gpu", lambda: _ort(result.model, feed, "CUDAExecutionProvider")),
            ("emulate", lambda: make_runner("emulate", result.model).run([feed]).outputs[0]),
            ("ort_cpu", lambda: _ort(result.model, feed, "CPUExecutionProvider")),
        ):
            try:
                row[label] = _rel_err(fn(), gold)
            except Exception as exc:  # e.g. no bf16 kernel on the executor
                row[label] = None
                row[f"{label}_error"] = f"{type(exc).__name__}: {exc}"[:200]
        if row.get("gpu") and row.get("emulate") is not None:
            row["emulate_over_gpu"] = row["emulate"] / row["gpu"]
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-torch", action="store_true", help="only the bundled models")
    args = parser.parse_args()
    import onnxruntime as ort

    print("providers:", ort.get_available_providers(), "onnxruntime", ort.__version__)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        models = _bundled()
        if not args.no_torch:
            try:
                models.update(_torch_models(Path(tmp)))
            except Exception:
                traceback.print_exc()
        for name, (path, feed) in models.items():
            rows.extend(measure(name, path, feed))
            for row in rows[-2:]:
                print(json.dumps(row))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fidelity.json").write_text(json.dumps(rows, indent=1))
    print(f"{'model':28} {'prec':5} {'gpu':>9} {'emulate':>9} {'ort_cpu':>9} {'emu/gpu':>8}")
    for row in rows:

        def fmt(v):
            return f"{v:9.2e}" if isinstance(v, float) else f"{'-':>9}"

        ratio = row.get("emulate_over_gpu")
        print(
            f"{row['model']:28} {row['precision']:5} {fmt(row.get('gpu'))} {fmt(row.get('emulate'))} "
            f"{fmt(row.get('ort_cpu'))} {ratio and f'{ratio:8.2f}' or '-':>8}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
