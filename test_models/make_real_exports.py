"""Make the bundled real exports: tiny Hugging Face and timm models, random init, exported by PyTorch.

    .venv-torch/bin/python -m test_models.make_real_exports           # from the repository root
    .venv-torch/bin/python -m test_models.make_real_exports bert_tiny # only some

Not run by CI or by ``python -m test_models.build`` (it needs torch). The committed files were made with:
Python 3.11.7, torch 2.13.0+cpu, transformers 5.24.0, timm 1.0.31 (torchvision 0.28.0), onnx 1.23.2,
onnxruntime 1.32.0, numpy 2.4.6, in a venv made by

    ~/.pyenv/versions/3.11.7/bin/python3 -m venv .venv-torch
    .venv-torch/bin/pip install torch==2.13.0 transformers timm onnx onnxscript onnxruntime

Other versions export other graphs; the script prints the versions it ran with and warns when they differ.

Each model is what users export: ``torch.onnx.export`` at opset 17 with named dynamic axes (``batch``,
``sequence``), weights from ``torch.manual_seed(0)`` (no download). The exporter is TorchScript's
(``dynamo=False``): it is what writes an author's ``softmax(..., dtype=torch.float32)`` and ``x.to(float32)``
as ``Cast(to=FLOAT)`` nodes in an FP32 graph; torch.export's exporter drops them as identities, and it
cannot write opset 17 for these models (it stays at 18). The text models take ``input_ids`` and
``attention_mask`` (without a mask, transformers 5 looks for packed sequences with ``aten::diff``, which
opset 17 lacks); the example mask has padding, so the trace keeps the mask's path.

Every export is checked before it is written: onnxruntime matches torch (max abs error <= 1e-4) at two batch
sizes and two sequence lengths, with and without padding. The text models also get ``inputs.npz``, their
default inputs for ``pytest --model NAME`` (ids below the vocabulary size; row 1 right-padded).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import test_models
from test_models.artifacts import npz_bytes, onnx_bytes, write_if_changed

VERSIONS = {
    "torch": "2.13.0+cpu",
    "transformers": "5.24.0",
    "timm": "1.0.31",
    "onnx": "1.23.2",
    "onnxruntime": "1.32.0",
    "numpy": "2.4.6",
}
OPSET = 17
VOCAB = 512
TEXT_AXES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
TEXT_SHAPES = ((2, 16), (1, 37), (3, 64))  # (batch, sequence) pairs checked against torch
_KEEP: list[Any] = []  # keeps the torchvision op library alive


@dataclass(frozen=True)
class Export:
    """One export: the module, example inputs, names, dynamic axes, and feeds to check it with."""

    module: Any
    example: tuple[Any, ...]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]]
    check_feeds: tuple[tuple[Any, ...], ...]


def allow_cpu_torch_with_cuda_torchvision() -> None:
    """timm imports torchvision; a CUDA build of torchvision cannot load its ``_C`` next to a CPU-only torch and
    then fails at import (``operator torchvision::nms does not exist``). Declare the two ops it registers fakes
    for, so torchvision imports without its C ops (none of which these models use)."""
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return
    libs = list(Path(spec.origin).parent.glob("_C*.so"))
    try:
        for lib in libs:
            ctypes.CDLL(str(lib))
        return
    except OSError as err:
        print(f"note: torchvision's C ops do not load ({err}); declaring nms/qnms so that it imports", file=sys.stderr)
    library = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _KEEP.append(library)


def text_feeds(batch: int, sequence: int, *, seed: int) -> tuple[Any, Any]:
    """(input_ids, attention_mask): ids in [0, VOCAB); the last row right-padded to half its length."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, sequence), generator=gen)
    mask = torch.ones(batch, sequence, dtype=torch.int64)
    if batch > 1:
        mask[-1, sequence // 2 :] = 0
    return ids, mask


def without_cache(model: Any, outputs: Sequence[str]) -> Any:
    """``model(input_ids, attention_mask)`` -> the named outputs, without the cache (what the export traces)."""
    import torch

    class TextModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            return tuple(out[name] for name in outputs)

    return TextModel().eval()


def _text_export(model: Any, outputs: Sequence[str], output_axes: dict[str, dict[int, str]]) -> Export:
    return Export(
        module=without_cache(model, outputs),
        example=text_feeds(2, 16, seed=1),
        input_names=("input_ids", "attention_mask"),
        output_names=tuple(outputs),
        dynamic_axes={**TEXT_AXES, **output_axes},
        check_feeds=tuple(text_feeds(b, s, seed=2 + i) for i, (b, s) in enumerate(TEXT_SHAPES)),
    )


def bert_tiny() -> Export:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=256,
    )
    seq = {0: "batch", 1: "sequence"}
    return _text_export(
        BertModel(config),
        ["last_hidden_state", "pooler_output"],
        {"last_hidden_state": seq, "pooler_output": {0: "batch"}},
    )


def gpt2_tiny() -> Export:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_inner=128,
        n_positions=256,
        bos_token_id=VOCAB - 1,
        eos_token_id=VOCAB - 1,
    )
    return _text_export(GPT2LMHeadModel(config), ["logits"], {"logits": {0: "batch", 1: "sequence"}})


def llama_tiny() -> Export:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        attn_implementation="eager",
        tie_word_embeddings=False,
    )
    return _text_export(LlamaForCausalLM(config), ["logits"], {"logits": {0: "batch", 1: "sequence"}})


def timm_mobilenetv3() -> Export:
    import timm
    import torch

    model = timm.create_model("mobilenetv3_small_050", pretrained=False, num_classes=10).eval()
    gen = torch.Generator().manual_seed(1)
    images = tuple((torch.rand(b, 3, 224, 224, generator=gen) * 2 - 1,) for b in (1, 3))
    return Export(
        module=model,
        example=images[0],
        input_names=("input",),
        output_names=("logits",),
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        check_feeds=images,
    )


BUILDERS: dict[str, Callable[[], Export]] = {
    "bert_tiny": bert_tiny,
    "gpt2_tiny": gpt2_tiny,
    "llama_tiny": llama_tiny,
    "timm_mobilenetv3": timm_mobilenetv3,
}


def export(name: str) -> onnx.ModelProto:
    """Build the named model from seed 0, export it and check onnxruntime against torch."""
    import torch

    torch.manual_seed(0)
    spec = BUILDERS[name]()
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        path = Path(tmp) / f"{name}.onnx"
        torch.onnx.export(
            spec.module,
            spec.example,
            str(path),
            input_names=list(spec.input_names),
            output_names=list(spec.output_names),
            dynamic_axes=spec.dynamic_axes,
            opset_version=OPSET,
            dynamo=False,
        )
        model = onnx.load(str(path))
        check_against_torch(name, path, spec)
    return model


def check_against_torch(name: str, path: Path, spec: Export) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for feed in spec.check_feeds:
        expected = spec.module(*feed)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = session.run(None, {n: t.numpy() for n, t in zip(spec.input_names, feed)})
        error = max(float(np.abs(g - e.numpy()).max()) for g, e in zip(got, expected))
        shape = "x".join(map(str, feed[0].shape))
        if error > 1e-4:
            raise RuntimeError(f"{name}: onnxruntime differs from torch by {error:.3g} at input shape {shape}")
        print(f"{name}: onnxruntime matches torch at {shape} (max abs error {error:.2g})")


def summary(name: str, model: onnx.ModelProto, size: int) -> str:
    ops = collections.Counter(n.op_type for n in model.graph.node)
    to_float = sum(
        1
        for n in model.graph.node
        if n.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in n.attribute)
    )
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    notable = {op: ops[op] for op in ("HardSwish", "Softmax", "MatMul", "Conv", "ReduceMean") if ops[op]}
    return (
        f"{name}: {size / 1e6:.2f} MB, {len(model.graph.node)} nodes, opset "
        f"{model.opset_import[0].version}, inputs {dims}, Cast(to=FLOAT) x{to_float}, {notable}"
    )


def text_inputs(name: str) -> bytes:
    """Default inputs for ``pytest --model NAME``: 2 x 64 ids below the vocabulary size, row 1 right-padded."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, size=(2, 64), dtype=np.int64)
    mask = np.ones((2, 64), dtype=np.int64)
    mask[1, 48:] = 0
    return npz_bytes(input_ids=ids, attention_mask=mask)


def check_versions() -> None:
    from importlib.metadata import version

    for package, wanted in VERSIONS.items():
        have = version(package)
        note = "" if have == wanted else f"  (the committed files were made with {wanted})"
        print(f"{package} {have}{note}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m test_models.make_real_exports", description=__doc__.splitlines()[0]
    )
    parser.add_argument("models", nargs="*", metavar="MODEL", help=f"default: all of {', '.join(BUILDERS)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(BUILDERS))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; real exports are {', '.join(BUILDERS)}")
    check_versions()
    allow_cpu_torch_with_cuda_torchvision()
    for name in args.models or list(BUILDERS):
        model = export(name)
        data = onnx_bytes(model)
        entry = test_models.MODELS[name]
        files = {entry.path: data}
        if entry.inputs_file is not None:
            files[entry.folder / entry.inputs_file] = text_inputs(name)
        for path, content in files.items():
            verb = "written" if write_if_changed(path, content) else "unchanged"
            print(f"{verb}: {path.relative_to(test_models.bundled_dir().parent)}")
        print(summary(name, model, len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
