"""The pair of models a diagnosis compares: the FP32 model and its conversion, on the golden's feeds, under the
case's tolerance policy, and where the comparison runs (:class:`ModelPair`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from harness.core.providers import CPU
from harness.data.recipes import Feed
from harness.judge.compare import Tolerance
from harness.judge.tolerances import TolerancePolicy


@dataclass(frozen=True)
class ModelPair:
    """The FP32 model and its conversion, compared on ``feeds`` (the golden's, in the FP32 model's input dtypes)
    under the case's tolerance policy; ``model_dir`` / ``converted_dir`` (default: ``model_dir``): the folders the
    models' external data is in."""

    reference: onnx.ModelProto
    converted: onnx.ModelProto
    feeds: Sequence[Feed]
    precision: str
    policy: TolerancePolicy
    model_dir: Path | None = None
    converted_dir: Path | None = None
    providers: tuple[str, ...] = (CPU,)
    """Where the side-by-side graph runs (the case's device first: :meth:`RunnerTraits.work_providers`)."""
    sizes: Mapping[str, int] = field(default_factory=dict)
    """Elements of each FP32 tensor at every feed, where known (:func:`tensor_sizes`): large ones are compared a
    slice at a time."""

    def tolerance(self, name: str, golden: np.ndarray) -> Tolerance:
        """The policy's tolerance for tensor ``name`` of this magnitude."""
        return self.policy.tolerance_for(precision=self.precision, output=name, golden=golden)


def tensor_sizes(shapes: Mapping[str, tuple[int, ...]], feeds: Sequence[Feed]) -> dict[str, int]:
    """Elements of each tensor from one run's ``shapes`` (the golden's magnitudes run), when every feed has the
    same input shapes (so every feed's tensors have those sizes); {} otherwise."""
    if len({tuple(sorted((k, np.shape(v)) for k, v in feed.items())) for feed in feeds}) != 1:
        return {}
    return {name: int(np.prod(shape, dtype=np.int64)) for name, shape in shapes.items()}
