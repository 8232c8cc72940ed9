"""The pair of models a diagnosis compares: the FP32 model and its conversion, on the golden's feeds, under the
case's tolerance policy, and where the comparison runs (:class:`ModelPair`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from harness.core.providers import CPU
from harness.data.recipes import Feed
from harness.judge.compare import CompareResult, Tolerance
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
    goldens: Sequence[Feed] = ()
    obtained: Callable[[], Sequence[Feed]] | None = None
    """The case's own outputs on ``feeds`` (read when called) against ``goldens``: with both, the FP32 model's graph
    outputs are judged from them, as the case's verdict judged them, and the side-by-side graph leaves them out,
    with the nodes only they need (a decoder's LM head and logits, in both halves)."""
    verdict: CompareResult | None = None
    """The case's verdict on those outputs: where it holds a float output's row (its golden all finite), the output
    is not read again nor judged again."""

    def case_outputs(self) -> frozenset[str]:
        """The graph outputs judged from the case's own outputs (none without them)."""
        if self.obtained is None or not self.goldens:
            return frozenset()
        return frozenset(o.name for o in self.reference.graph.output) & frozenset(self.goldens[0])

    def tolerance(self, name: str, golden: np.ndarray) -> Tolerance:
        """The policy's tolerance for tensor ``name`` of this magnitude."""
        return self.policy.tolerance_for(precision=self.precision, output=name, golden=golden)


def tensor_sizes(shapes: Mapping[str, tuple[int, ...]], feeds: Sequence[Feed]) -> dict[str, int]:
    """Elements of each tensor from one run's ``shapes`` (the golden's magnitudes run), when every feed has the
    same input shapes (so every feed's tensors have those sizes); {} otherwise."""
    if len({tuple(sorted((k, np.shape(v)) for k, v in feed.items())) for feed in feeds}) != 1:
        return {}
    return {name: int(np.prod(shape, dtype=np.int64)) for name, shape in shapes.items()}
