"""A minimal castguard runner plugin: runs the model with onnx's reference evaluator (numpy, in the stored type).

castguard finds it through the ``castguard.runners`` entry point in this package's pyproject.toml. The class
declares what castguard must know before it builds one: the low types it runs (fp16 only: numpy has no bf16
arithmetic, so castguard skips bf16 cases with the reason) and that its fp16 tensors really hold fp16 values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from harness.runners import Runner

__version__ = "0.1.0"


class OnnxRefRunner(Runner):
    """``onnxref``: onnx.reference.ReferenceEvaluator, one op at a time in numpy."""

    precisions = ("fp16",)  # the low types this runner can run
    rounds_low_precision = True  # numpy stores every fp16 result as fp16

    def __init__(self, model: onnx.ModelProto, *, model_dir: Path | None = None) -> None:
        super().__init__(model, name="onnxref", rounds_low_precision=self.rounds_low_precision, model_dir=model_dir)
        self._evaluator: ReferenceEvaluator | None = None

    def activate_impl(self) -> None:
        self._evaluator = ReferenceEvaluator(self.model)

    def infer_impl(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        assert self._evaluator is not None
        names = [o.name for o in self.model.graph.output]
        return dict(zip(names, self._evaluator.run(None, dict(feed))))

    def deactivate_impl(self) -> None:
        self._evaluator = None
