"""Child process of the reference run: ``python .../harness/convert/refrun.py`` (run as a script, so that only
numpy, onnxruntime and the standard-library :mod:`harness.core.child` are imported).

Reads its request through :mod:`harness.core.child` (model path, providers, feed files), runs the model once per
batch and folds the batches by abs-max, one batch at a time (only running figures are kept), and answers the
result. With a ``plan`` (:mod:`harness.convert.reductions`) the model returns a few
reductions per tensor, computed inside onnxruntime; the tensors the plan leaves ``raw`` (and, without a plan,
every tensor: the copy path) come out whole and are reduced here in numpy. It runs in its own process so that a native crash inside onnxruntime
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
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.child import read_request, write_answer


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


_ELEM = {
    "float": 1,
    "uint8": 2,
    "int8": 3,
    "uint16": 4,
    "int16": 5,
    "int32": 6,
    "int64": 7,
    "bool": 9,
    "float16": 10,
    "double": 11,
    "bfloat16": 16,
}
"""onnx.TensorProto element types by onnxruntime type name (onnx is not imported here: startup time)."""


TEST_SIGNAL_VARIABLE = "CASTGUARD_TEST_REFRUN_SIGNAL"


def _ort_type_to_elem(ort_type: str) -> int:
    inner = ort_type[len("tensor(") : -1] if ort_type.startswith("tensor(") else ""
    return _ELEM.get(inner, 0)


def _fold(
    pairs: Iterable[tuple[str, object]],
    absmax: dict[str, float],
    absmin: dict[str, float],
    shapes: dict[str, list[int]],
) -> None:
    """Reduce each tensor to (abs-max, abs-min, shape) and fold it into the running figures."""
    for name, value in pairs:
        if not isinstance(value, np.ndarray):
            continue
        absmax[name] = max(absmax.get(name, 0.0), _absmax(value))
        smallest = _absmin(value)
        if smallest > 0:
            absmin[name] = min(absmin.get(name, smallest), smallest)
        shapes.setdefault(name, list(value.shape))


def _fold_reduced(
    plan: dict[str, Any],
    stats: dict[str, np.ndarray],
    absmax: dict[str, float],
    absmin: dict[str, float],
    shapes: dict[str, list[int]],
) -> None:
    """Fold one batch's in-graph reductions, giving exactly the figures :func:`_fold` gives for whole tensors."""
    outputs, empty = plan["outputs"], set()
    vector, position = stats.get(outputs.get("shapes"), np.zeros(0, np.int64)), 0
    for name, rank in zip(plan["shapes"], plan["ranks"]):
        if rank < 0:
            rank, position = int(vector[position]), position + 1
        dims = [int(d) for d in vector[position : position + rank]]
        position += rank
        shapes.setdefault(name, dims)
        absmax.setdefault(name, 0.0)  # strings and empty tensors: 0.0, as _absmax gives them
        if 0 in dims:
            empty.add(name)
    for kind, names, width in (("f32", plan["floats"], 3), ("f64", plan["doubles"], 3), ("i64", plan["ints"], 2)):
        if not names:
            continue
        rows = stats[outputs[kind]].reshape(len(names), width)
        for name, row in zip(names, rows):
            if name in empty:
                continue
            high, low = row[0], row[1]
            if kind != "i64" and not (math.isfinite(high) and math.isfinite(low) and not math.isnan(row[2])):
                value = math.inf  # an inf shows in max or min; a NaN in the sum (max and min may skip it)
            else:
                value = max(abs(float(high)), abs(float(low)))
            absmax[name] = max(absmax[name], value)
    for kind, names in (("absmin", plan["absmins"]), ("absmin64", plan["absmin_doubles"])):
        for name, value in zip(names, stats[outputs[kind]] if names else ()):
            smallest = float(value)
            if name not in empty and 0 < smallest < math.inf:
                absmin[name] = min(absmin.get(name, smallest), smallest)


def _session(ort: Any, model: str | bytes, options: Any, providers: list[Any]) -> tuple[Any, str | None]:
    """The session, and a warning when CUDA was asked for but the session runs without it (then on CPU)."""
    available = ort.get_available_providers()
    wanted = [p for p in providers if p[0] in available]
    cuda = [p for p in providers if p[0] == "CUDAExecutionProvider"]
    note = None
    if cuda and cuda[0] not in wanted:
        note = (
            f"CUDAExecutionProvider is not available in this onnxruntime (available: {available}); the "
            f"reference run uses the CPU"
        )
        wanted = wanted or [("CPUExecutionProvider", {})]
    session = ort.InferenceSession(model, sess_options=options, providers=wanted)
    if cuda and note is None and "CUDAExecutionProvider" not in session.get_providers():
        note = (
            "onnxruntime could not start CUDAExecutionProvider (no usable GPU or CUDA libraries); the reference "
            "run uses the CPU"
        )
    return session, note


def _peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM, which starts anew at exec (ru_maxrss keeps the parent's peak
    when the parent was spawned with vfork, as subprocess does)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        import resource  # POSIX only: imported here, so the child starts on every OS
    except ImportError:
        return 0.0  # neither /proc nor getrusage: unknown
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(request: dict[str, Any]) -> dict[str, object]:
    import onnxruntime as ort

    missing = [
        name
        for name, _ in request["providers"]
        if name not in ort.get_available_providers() and name != "CUDAExecutionProvider"
    ]
    if missing:
        return {
            "error": f"execution providers {missing} are not available in this onnxruntime "
            f"(available: {ort.get_available_providers()})",
            "stage": "load",
        }
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # One run with every tensor an output: the extended optimizations and weight prepacking cannot pay off
    # (fusions are blocked by the outputs) and cost seconds on big weights (VGG-19: 4.3 s -> 0.02 s to load)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if request.get("plan"):
        # In-graph reductions read every recorded tensor, which blocks the same fusions; the basic level's
        # constant folding and common-subexpression passes over the added nodes cost more than they save
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        # The priority-based order follows the node list, where each tensor's reductions come right after its
        # producer: tensors are freed as in a plain forward (the default order kept them all: 2.5x the memory)
        options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    options.add_session_config_entry("session.disable_prepacking", "1")
    model: str | bytes = request["model"]
    if request.get("external_folder"):  # a graph whose weights stay in the model's own folder
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", request["external_folder"]
        )
        model = Path(request["model"]).read_bytes()
    started = time.perf_counter()
    try:
        session, note = _session(ort, model, options, request["providers"])
    except Exception as err:  # noqa: BLE001 - any ORT load failure is reported to the parent verbatim
        return {"error": str(err), "stage": "load"}
    outputs = session.get_outputs()
    names = [o.name for o in outputs]
    loaded = time.perf_counter()
    plan = request.get("plan")
    stat_names = set(plan["outputs"].values()) if plan else set()
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
        for group in request.get("groups") or [names]:  # bounded output bytes per run (see convert/outputs.py)
            try:
                values = session.run(group, feed)
            except Exception as err:  # noqa: BLE001 - reported to the parent, which raises ConversionError
                return {"error": str(err), "stage": "run"}
            stats = {name: value for name, value in zip(group, values) if name in stat_names}
            if stats and plan is not None:
                _fold_reduced(plan, stats, absmax, absmin, shapes)
            _fold(((n, v) for n, v in zip(group, values) if n not in stat_names), absmax, absmin, shapes)
            del values, stats
    dtypes = {
        o.name: _ort_type_to_elem(o.type)
        for o in [*session.get_inputs(), *outputs]
        if not (plan and o.name.startswith(plan["prefix"]))
    }
    if plan:
        dtypes.update(plan["dtypes"])
    return {
        "absmax": {k: ("inf" if math.isinf(v) else v) for k, v in absmax.items()},
        "absmin": absmin,
        "shapes": shapes,
        "dtypes": dtypes,
        "note": note,
        "providers": session.get_providers(),
        "peak_rss_mb": _peak_rss_mb(),
        "load_s": loaded - started,
        "run_s": time.perf_counter() - loaded,
    }


def main() -> int:
    write_answer(run(read_request()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
