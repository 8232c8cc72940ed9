"""``reference``: onnx.reference.ReferenceEvaluator, a slow second opinion that computes in the storage dtype.

It rounds after every op (numpy fp16, ml_dtypes bf16), but has its own accumulation quirks, measured in
``shared/reference/ort_lowprecision.md`` §1.2: fp16 CumSum and bf16 ReduceSum/ReduceMean/CumSum/Softmax/
GlobalAveragePool accumulate in low precision; fp16 LayerNormalization of large values gives NaN;
BatchNormalization below opset 14 is wrong even in fp32. Use it to cross-check ``emulate``, not as the oracle.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.errors import RunnerError, RunnerUnavailable
from harness.data.feeds import Feed
from harness.runners.base import Runner

# What the evaluator raises for a model it cannot run (it has no error hierarchy of its own).
_EVALUATOR_ERRORS = (ValueError, TypeError, RuntimeError, IndexError, KeyError, AttributeError)


class ReferenceRunner(Runner):
    """Runs the model with ``onnx.reference.ReferenceEvaluator``."""

    def __init__(self, model: onnx.ModelProto, *, model_dir: Path | None = None) -> None:
        super().__init__(model, name="reference", rounds_low_precision=True, model_dir=model_dir)
        self._evaluator: Any = None
        self._names = [o.name for o in model.graph.output]

    def activate_impl(self) -> None:
        from onnx.reference import ReferenceEvaluator

        try:
            self._evaluator = ReferenceEvaluator(self.model)
        except NotImplementedError as err:
            raise RunnerUnavailable(f"reference: onnx.reference cannot run this model: {err}") from err
        except _EVALUATOR_ERRORS as err:
            raise RunnerError(f"reference: onnx.reference could not load the model: {err}") from err

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        try:
            results = self._evaluator.run(None, feed)
        except NotImplementedError as err:
            raise RunnerUnavailable(f"reference: onnx.reference cannot run this model: {err}") from err
        except _EVALUATOR_ERRORS as err:
            raise RunnerError(f"reference: onnx.reference failed while running: {err}") from err
        return {name: np.asarray(value) for name, value in zip(self._names, results)}

    def deactivate_impl(self) -> None:
        self._evaluator = None
