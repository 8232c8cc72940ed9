"""Child process of the reference run: ``python .../harness/convert/refrun.py`` (run as a script, so that only
numpy, onnxruntime and the standard-library :mod:`harness.child` are imported).

Reads its request through :mod:`harness.child` (model path, providers, feed files), runs the model once per batch
with every intermediate tensor marked as an output, folds the batches by abs-max, and answers the result. It runs in its own process so that a native crash inside onnxruntime
(SIGFPE, SIGSEGV) cannot take the caller down; the parent turns a crash into a ConversionError.

Test-only hook: with ``CASTGUARD_TEST_REFRUN_SIGNAL=SIGFPE`` (any signal name) in its environment the child
kills itself with that signal where onnxruntime would run the first batch, so the crash path is tested
without relying on an onnxruntime bug.
"""
from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from harness.child import read_request, write_answer


def _absmax(array: np.ndarray) -> float:
    if array.size == 0 or array.dtype.kind not in "fiub":
        return 0.0
    if array.dtype.kind == "b":
        return float(array.any())
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        return math.inf
    return float(np.abs(array.astype(np.float64) if array.dtype.kind != "f" else array).max())


def _absmin(array: np.ndarray) -> float:
    """Smallest non-zero finite magnitude of a float array (0.0: none), to spot values that flush in fp16."""
    if array.size == 0 or array.dtype.kind != "f":
        return 0.0
    magnitudes = np.abs(array[np.isfinite(array) & (array != 0)])
    return float(magnitudes.min()) if magnitudes.size else 0.0


_ELEM = {"float": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
         "float16": 10, "double": 11, "bfloat16": 16}
"""onnx.TensorProto element types by onnxruntime type name (onnx is not imported here: startup time)."""


TEST_SIGNAL_VARIABLE = "CASTGUARD_TEST_REFRUN_SIGNAL"


def _ort_type_to_elem(ort_type: str) -> int:
    inner = ort_type[len("tensor("):-1] if ort_type.startswith("tensor(") else ""
    return _ELEM.get(inner, 0)


def _fold(pairs: Iterable[tuple[str, object]], absmax: dict[str, float], absmin: dict[str, float],
          shapes: dict[str, list[int]]) -> None:
    """Reduce each tensor to (abs-max, abs-min, shape) and fold it into the running figures."""
    for name, value in pairs:
        if not isinstance(value, np.ndarray):
            continue
        absmax[name] = max(absmax.get(name, 0.0), _absmax(value))
        smallest = _absmin(value)
        if smallest > 0:
            absmin[name] = min(absmin.get(name, smallest), smallest)
        shapes.setdefault(name, list(value.shape))


def run(request: dict[str, Any]) -> dict[str, object]:
    import onnxruntime as ort

    missing = [name for name, _ in request["providers"] if name not in ort.get_available_providers()]
    if missing:
        return {"error": f"execution providers {missing} are not available in this onnxruntime "
                         f"(available: {ort.get_available_providers()})", "stage": "load"}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # One run with every tensor an output: the extended optimizations and weight prepacking cannot pay off
    # (fusions are blocked by the outputs) and cost seconds on big weights (VGG-19: 4.3 s -> 0.02 s to load)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.add_session_config_entry("session.disable_prepacking", "1")
    model: str | bytes = request["model"]
    if request.get("external_folder"):   # a graph whose weights stay in the model's own folder
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         request["external_folder"])
        model = Path(request["model"]).read_bytes()
    try:
        session = ort.InferenceSession(model, sess_options=options, providers=request["providers"])
    except Exception as err:  # noqa: BLE001 - any ORT load failure is reported to the parent verbatim
        return {"error": str(err), "stage": "load"}
    outputs = session.get_outputs()
    names = [o.name for o in outputs]
    absmax: dict[str, float] = {}
    absmin: dict[str, float] = {}
    shapes: dict[str, list[int]] = {}
    crash = os.environ.get(TEST_SIGNAL_VARIABLE)
    for batch_file in request["batches"]:
        if crash:
            os.kill(os.getpid(), signal.Signals[crash])
        with np.load(batch_file, allow_pickle=False) as npz:
            feed = {key: npz[key] for key in npz.files}
        _fold(feed.items(), absmax, absmin, shapes)
        for group in request.get("groups") or [names]:   # bounded output bytes per run (see convert/outputs.py)
            try:
                values = session.run(group, feed)
            except Exception as err:  # noqa: BLE001 - reported to the parent, which raises ConversionError
                return {"error": str(err), "stage": "run"}
            _fold(zip(group, values), absmax, absmin, shapes)
            del values
    dtypes = {o.name: _ort_type_to_elem(o.type) for o in [*session.get_inputs(), *outputs]}
    return {"absmax": {k: ("inf" if math.isinf(v) else v) for k, v in absmax.items()}, "absmin": absmin,
            "shapes": shapes, "dtypes": dtypes}


def main() -> int:
    write_answer(run(read_request()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
