"""``reference``: onnx.reference.ReferenceEvaluator, a slow second opinion that computes in the storage dtype.

It rounds after every op (numpy fp16, ml_dtypes bf16), but has its own accumulation quirks, measured in
``docs/runtime-facts.md`` §1.2: fp16 CumSum and bf16 ReduceSum/ReduceMean/CumSum/Softmax/
GlobalAveragePool accumulate in low precision; fp16 LayerNormalization of large values gives NaN;
BatchNormalization below opset 14 is wrong even in fp32. Use it to cross-check ``emulate``, not as the oracle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from harness.core.errors import RunnerError, RunnerUnavailable
from harness.data.feeds import Feed
from harness.data.onnxfile import external_tensors, tensor_array, tensor_nbytes
from harness.runners.base import Runner

# What the evaluator raises for a model it cannot run (it has no error hierarchy of its own).
_EVALUATOR_ERRORS = (ValueError, TypeError, RuntimeError, IndexError, KeyError, AttributeError)


MAX_EXTERNAL_BYTES = 512 << 20
"""Weights on disk (a lazily loaded model) above this are refused: the evaluator holds every tensor in numpy and
runs each op in Python, minutes to hours for a multi-GB model."""


def in_memory(model: onnx.ModelProto, *, model_dir: Path | None) -> onnx.ModelProto:
    """`model` with its external weights loaded (pending casts applied); RunnerUnavailable when they are big."""
    external = external_tensors(model)
    if not external:
        return model
    total = sum(tensor_nbytes(t) for t in external)
    if total > MAX_EXTERNAL_BYTES or model_dir is None:
        raise RunnerUnavailable(
            f"reference: onnx.reference is not useful for a model with {total / 2**30:.1f} GiB "
            "of external weights (it holds them all in numpy and runs every op in Python); "
            "use --runner emulate (onnxruntime) for big models"
        )
    loaded = onnx.ModelProto()
    loaded.CopyFrom(model)
    for tensor in external_tensors(loaded):
        tensor.CopyFrom(numpy_helper.from_array(tensor_array(tensor, model_dir), tensor.name))
    return loaded


class ReferenceRunner(Runner):
    """Runs the model with ``onnx.reference.ReferenceEvaluator``."""

    def __init__(self, model: onnx.ModelProto, *, model_dir: Path | None = None) -> None:
        super().__init__(model, name="reference", rounds_low_precision=True, model_dir=model_dir)
        self._evaluator: Any = None
        self._names = [o.name for o in model.graph.output]

    def activate_impl(self) -> None:
        from onnx.reference import ReferenceEvaluator

        try:
            self._evaluator = ReferenceEvaluator(in_memory(self.model, model_dir=self.model_dir))
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
