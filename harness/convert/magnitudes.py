"""The expensive step: one onnxruntime run that records every tensor's abs-max, shape and dtype.

A sweep calls :func:`collect_magnitudes` once per model and input set and then :func:`~harness.convert.convert`
many times. The run happens in a child process (``harness.convert.refrun``): an onnxruntime error
becomes a :class:`ConversionError` naming the node, and a native crash cannot kill the caller.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.convert.calibration import Feed, load_calibration, random_feeds
from harness.convert.outputs import MAX_OUTPUT_BYTES, output_groups
from harness.convert.childmodel import ChildModel, child_model, scratch_folder
from harness.data.onnxfile import is_lazy, load_model
from harness.providers import CPU, CUDA, DIRECTML, TENSORRT
from harness.child import ChildFailed, run_child
from harness.errors import ConversionError, InputDataError

SCHEMA_VERSION = 1
REFRUN = Path(__file__).with_name("refrun.py")   # the child script (harness.child's protocol)
Provider = tuple[str, dict[str, str]]
_NODE_PATTERNS = (re.compile(r"node with name '([^']+)'"), re.compile(r"Name:'([^']+)'"),
                  re.compile(r"[Nn]ode \(([^)]+)\)"), re.compile(r"node name: ([^\s,)]+)"))
_PROVIDERS = {"cpu": CPU, "cuda": CUDA, "trt": TENSORRT, "dml": DIRECTML}


class ReferenceRunError(ConversionError):
    """onnxruntime refused the model: ``stage`` "load" (no kernel, bad model) or "run" (the data)."""

    def __init__(self, *, stage: str, where: str, problem: str, fix: str, node: str | None = None,
                 step: str | None = None) -> None:
        self.stage = stage
        super().__init__(where=where, problem=problem, fix=fix, node=node, step=step)


@dataclass(frozen=True)
class Magnitudes:
    """Per-tensor reference statistics of one model on one data set (inf = non-finite seen). ``absmin``: the
    smallest non-zero finite magnitude of float tensors that have one (optional in the JSON)."""

    absmax: Mapping[str, float]
    shapes: Mapping[str, tuple[int, ...]]
    dtypes: Mapping[str, int]
    data_source: str
    batches: int = 1
    absmin: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({
            "schema_version": SCHEMA_VERSION,
            "absmax": {k: ("inf" if math.isinf(v) else v) for k, v in sorted(self.absmax.items())},
            "shapes": {k: list(v) for k, v in sorted(self.shapes.items())},
            "dtypes": dict(sorted(self.dtypes.items())),
            "data_source": self.data_source,
            "batches": self.batches,
            "absmin": dict(sorted(self.absmin.items())),
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Magnitudes:
        try:
            doc = json.loads(text)
            if doc.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
            return cls(absmax={k: float(v) for k, v in doc["absmax"].items()},
                       shapes={k: tuple(int(d) for d in v) for k, v in doc["shapes"].items()},
                       dtypes={k: int(v) for k, v in doc["dtypes"].items()},
                       data_source=str(doc["data_source"]), batches=int(doc["batches"]),
                       absmin={k: float(v) for k, v in doc.get("absmin", {}).items()})
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise InputDataError(where="magnitudes JSON", problem=f"cannot read cached magnitudes ({err})",
                                 fix="delete the cache file; it is rebuilt by collect_magnitudes") from None


def collect_magnitudes(model: onnx.ModelProto | str | Path, *,
                       calibration_data: str | Path | Mapping[str, np.ndarray] | None = None,
                       feeds: Sequence[Feed] | None = None,
                       input_shapes: Mapping[str, Sequence[int]] | None = None,
                       providers: Sequence[str] = ("cpu",), seed: int = 0,
                       trt_plugins: Sequence[str] = (), base_dir: Path | None = None,
                       max_output_bytes: int = MAX_OUTPUT_BYTES, dynamic_default: int | None = None) -> Magnitudes:
    """Run the model once per batch (random data, calibration data or `feeds`) and fold by abs-max.

    Random data sizes dynamic non-batch dims nobody gave in `input_shapes` with `dynamic_default` (castguard
    convert passes :data:`~harness.data.sizing.DYNAMIC_DEFAULT`); None refuses them, as the harness does.

    A path is loaded lazily (weights stay on disk); so may a ModelProto be, with `base_dir` its folder. The
    child reduces each tensor to (abs-max, abs-min, shape) as soon as it is produced and asks onnxruntime for
    at most about `max_output_bytes` of intermediate tensors per run (more runs when they are larger).
    """
    if not isinstance(model, onnx.ModelProto):
        base_dir = Path(model).parent
        model = load_model(Path(model), weights="lazy")
    if feeds is not None:
        batches, source = [dict(f) for f in feeds], f"feeds ({len(feeds)} batches)"
    elif calibration_data is not None:
        batches, source = load_calibration(calibration_data, model)
    else:
        batches, source = random_feeds(model, seed=seed, input_shapes=input_shapes,
                                        dynamic_default=dynamic_default)
    if not batches:
        raise InputDataError(where="feeds", problem="no batches to run", fix="give at least one feed")
    if is_lazy(model) and base_dir is None:
        raise ValueError("collect_magnitudes: the model has external tensors; pass base_dir (their folder)")
    lazy = is_lazy(model)
    child = child_model(model, external_ok=not lazy)
    groups = output_groups(child.model, max_output_bytes=max_output_bytes, feed=batches[0])
    result = _run_child(child, batches, _provider_list(providers, trt_plugins), source,
                        external_folder=base_dir if lazy else None, groups=groups)
    return Magnitudes(absmax={k: float(v) for k, v in result["absmax"].items()},
                      shapes={k: tuple(v) for k, v in result["shapes"].items()},
                      dtypes={k: v for k, v in result["dtypes"].items() if v}, data_source=source,
                      batches=len(batches), absmin={k: float(v) for k, v in result["absmin"].items()})


def _provider_list(providers: Sequence[str], trt_plugins: Sequence[str]) -> list[Provider]:
    result: list[Provider] = []
    for spec in providers:
        kind, _, device = spec.partition(":")
        if kind not in _PROVIDERS or (device and not device.isdigit()):
            raise ConversionError(where="providers", problem=f"unknown execution provider {spec!r}",
                                  fix="use cpu, cuda:N, trt or dml", step="reference run")
        options: dict[str, str] = {"device_id": device} if device else {}
        if kind == "trt" and trt_plugins:
            options["trt_extra_plugin_lib_paths"] = ";".join(trt_plugins)
        result.append((_PROVIDERS[kind], options))
    result.sort(key=lambda p: p[0] != TENSORRT)  # TensorRT first, as AutoCast orders it
    return result


def _run_child(child: ChildModel, batches: list[Feed], providers: list[Provider], source: str, *,
               external_folder: Path | None, groups: list[list[str]]) -> dict[str, Any]:
    """Run refrun.py in a fresh process on `child` (external tensors of a lazy model are read from
    `external_folder`, the model's own folder)."""
    with scratch_folder(child.size) as work:
        model_path = child.write(work)
        batch_files = []
        for index, feed in enumerate(batches):
            path = work / f"batch{index}.npz"
            np.savez(path, allow_pickle=False, **feed)
            batch_files.append(str(path))
        available = [p[0] for p in providers]
        request = {"model": str(model_path), "providers": providers, "batches": batch_files, "groups": groups,
                   "external_folder": str(external_folder.resolve()) if external_folder is not None else None}
        try:
            result: dict[str, Any] = run_child(REFRUN, request, what="reference run", timeout_s=None).answer
        except ChildFailed as failed:
            raise _crash_error(failed, f"{source} ({', '.join(available)})") from None
    if "error" in result:
        message = result["error"]
        node = next((m.group(1) for p in _NODE_PATTERNS if (m := p.search(message))), None)
        ops = {n.name: n.op_type for n in child.model.graph.node}
        op = f" (op {ops[node]})" if node in ops else ""
        if not op and len(set(ops.values())) <= 3 and not any(t in message for t in ops.values()):
            op = f" (ops in the model: {', '.join(sorted(set(ops.values())))})"
        raise ReferenceRunError(
            stage=result["stage"], where="reference run", step="reference run", node=node,
            problem=f"onnxruntime cannot {result['stage']} the model{op} on {source}: {message.strip()[:1500]}",
            fix="give representative calibration data (calibration_data=... / --calibration_data) "
                "or input shapes, or skip the run with data_max=inf")
    return result


def _crash_error(failed: ChildFailed, running_on: str) -> ConversionError:
    """The reference run's process gave no result: a signal (SIGFPE: an integer division by zero, the random
    data's doing, not the model's), a non-zero exit or no answer."""
    if failed.signal == "SIGFPE":
        return ReferenceRunError(
            stage="run", where="reference run", step="reference run", node=None,
            problem=f"onnxruntime crashed with SIGFPE (an integer division by zero) running the model on {running_on}",
            fix="give representative calibration data (calibration_data=... / --calibration_data), or skip the "
                "run with data_max=inf")
    if failed.kind == "signal":
        return ConversionError(
            where="reference run", step="reference run",
            problem=f"onnxruntime crashed with {failed.signal} running the model on {running_on}",
            fix="give representative calibration data (calibration_data=...) or skip the run with data_max=inf")
    return ConversionError(where="reference run", step="reference run",
                           problem=f"the reference process failed (rc={failed.returncode}): "
                                   f"{failed.stderr.strip()[-2000:]}",
                           fix="check that onnxruntime can load this model")

