"""Registry of the models bundled with castguard.

Each bundled model lives in ``test_models/<name>/<name>.onnx``. The models built in code or trained in numpy
are rebuilt, byte for byte, by ``python -m test_models.build``; the real exports (tiny Hugging Face and timm
models with dynamic dims) are made once by ``python -m test_models.make_real_exports``, which needs torch and is
not run in CI (``made_by`` says which). This module only describes
them (it imports nothing heavy), so ``harness.data.models`` can resolve
``--model mnist`` and pick the model's default inputs and value ranges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType


@dataclass(frozen=True)
class BundledModel:
    """One bundled model: where it is and how it is fed by default."""

    name: str
    description: str
    inputs_file: str | None = None  # relative to the model's folder
    val_ranges: tuple[tuple[str, float, float], ...] = ()
    extra_files: tuple[str, ...] = field(default=())  # other committed artifacts, relative to the model's folder
    made_by: str = "test_models.build"  # the module that writes its files (python -m MADE_BY NAME)

    @property
    def folder(self) -> Path:
        return bundled_dir() / self.name

    @property
    def path(self) -> Path:
        return self.folder / f"{self.name}.onnx"

    def artifacts(self) -> tuple[Path, ...]:
        """Every committed file this model owns (the .onnx first)."""
        return (self.path, *(self.folder / rel for rel in self.extra_files))


_MNIST_PGMS = tuple(f"{digit}.pgm" for digit in range(10))
_EXPORTED = "test_models.make_real_exports"
_TEXT = (
    "random init, 2 layers, hidden 64, vocabulary 512; torch.onnx.export opset 17, input_ids and "
    "attention_mask [batch, sequence]; inputs.npz: 2x64 ids, row 1 right-padded"
)
_REAL_EXPORTS = (
    BundledModel(
        name="bert_tiny",
        description=f"transformers BertModel (sdpa attention), {_TEXT}",
        inputs_file="inputs.npz",
        extra_files=("inputs.npz",),
        made_by=_EXPORTED,
    ),
    BundledModel(
        name="gpt2_tiny",
        description=f"transformers GPT2LMHeadModel (sdpa attention), {_TEXT}",
        inputs_file="inputs.npz",
        extra_files=("inputs.npz",),
        made_by=_EXPORTED,
    ),
    BundledModel(
        name="llama_tiny",
        description=f"transformers LlamaForCausalLM (RMSNorm, rotary, eager attention with "
        f"softmax(dtype=float32): Cast(to=FLOAT) nodes), {_TEXT}",
        inputs_file="inputs.npz",
        extra_files=("inputs.npz",),
        made_by=_EXPORTED,
    ),
    BundledModel(
        name="timm_mobilenetv3",
        description="timm mobilenetv3_small_050 (HardSwish), random init, 10 classes; torch.onnx.export "
        "opset 17, input [batch, 3, 224, 224] (batch defaults to 1)",
        made_by=_EXPORTED,
    ),
)

MODELS: Mapping[str, BundledModel] = MappingProxyType(
    {
        m.name: m
        for m in (
            BundledModel(
                name="mnist",
                description=(
                    "Small CNN trained in numpy on scikit-learn's 8x8 digits upsampled to 28x28, with the ONNX-zoo "
                    "MNIST graph names (Input3 [1,1,28,28] -> Plus214_Output_0 [1,10]); ten digit .pgm files as in "
                    "the TensorRT strongly_type_autocast sample"
                ),
                inputs_file="digits.npz",
                extra_files=(*_MNIST_PGMS, "digits.npz", "8.npz"),
            ),
            BundledModel(
                name="needs_constraints",
                description=(
                    "Polygraphy's precision-constraints example: x [1,8] -> MatMul(flip) -> Add(65504) -> "
                    "Sub(65504) -> MatMul(flip) -> y; Add/Sub overflow in fp16 for x in [1,2]"
                ),
                val_ranges=(("x", 1.0, 2.0),),
            ),
            BundledModel(
                name="explicit_typing",
                description=(
                    "Torch-TensorRT's explicit-typing MyModule: linear1 fp32 -> Cast fp16 -> linear2 fp16 -> "
                    "Cast fp32 -> linear3 fp32 (x [1,10] -> y [1,40])"
                ),
            ),
            BundledModel(
                name="transformer_block",
                description=(
                    "One pre-norm attention block (LayerNormalization, MatMul, Softmax) followed by a hand-written "
                    "norm (ReduceMean, Pow, Sqrt, Div): the ops usually kept in fp32"
                ),
            ),
            BundledModel(
                name="if_branch",
                description="An If node whose then/else subgraphs compute different elementwise chains",
            ),
            *_REAL_EXPORTS,
        )
    }
)


def bundled_dir() -> Path:
    """The folder holding the bundled models (this package's folder)."""
    return Path(__file__).resolve().parent


def names() -> list[str]:
    """Names of the bundled models, sorted."""
    return sorted(MODELS)


def built_names() -> list[str]:
    """Names of the bundled models that ``python -m test_models.build`` rebuilds (no torch needed), sorted."""
    return sorted(name for name, entry in MODELS.items() if entry.made_by == "test_models.build")


def _key(model_name: str) -> str:
    return model_name.removesuffix(".onnx")


def get(model_name: str) -> BundledModel | None:
    """The registry entry for ``mnist`` or ``mnist.onnx``; ``None`` if it is not a bundled model."""
    return MODELS.get(_key(model_name))


def default_inputs(model_name: str) -> Path | None:
    """The inputs file a bundled model is fed with by default; ``None`` for models without one or not bundled."""
    entry = get(model_name)
    if entry is None or entry.inputs_file is None:
        return None
    return entry.folder / entry.inputs_file


def default_val_ranges(model_name: str) -> dict[str, tuple[float, float]]:
    """Per-input value ranges for random inputs of a bundled model (``{}`` when none are needed or not bundled)."""
    entry = get(model_name)
    if entry is None:
        return {}
    return {name: (lo, hi) for name, lo, hi in entry.val_ranges}


__all__ = [
    "MODELS",
    "BundledModel",
    "built_names",
    "bundled_dir",
    "default_inputs",
    "default_val_ranges",
    "get",
    "names",
]
