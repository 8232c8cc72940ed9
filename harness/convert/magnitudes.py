"""The expensive step: one onnxruntime run that records every tensor's abs-max, shape and dtype.

A sweep calls :func:`collect_magnitudes` once per model and input set and then :func:`~harness.convert.convert`
many times. The run happens in a child process (``harness.convert.refrun``): an onnxruntime error
becomes a :class:`ConversionError` naming the node, and a native crash cannot kill the caller.
"""
from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.convert.calibration import Feed, load_calibration, random_feeds
from harness.convert.outputs import MAX_OUTPUT_BYTES, output_groups
from harness.data.onnxfile import is_lazy, load_model, save_model
from harness.errors import ConversionError, InputDataError

SCHEMA_VERSION = 1
Provider = tuple[str, dict[str, str]]
_NODE_PATTERNS = (re.compile(r"node with name '([^']+)'"), re.compile(r"Name:'([^']+)'"),
                  re.compile(r"[Nn]ode \(([^)]+)\)"), re.compile(r"node name: ([^\s,)]+)"))
_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "trt": "TensorrtExecutionProvider",
              "dml": "DmlExecutionProvider"}


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
                       max_output_bytes: int = MAX_OUTPUT_BYTES) -> Magnitudes:
    """Run the model once per batch (random data, calibration data or `feeds`) and fold by abs-max.

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
        batches, source = random_feeds(model, seed=seed, input_shapes=input_shapes)
    if not batches:
        raise InputDataError(where="feeds", problem="no batches to run", fix="give at least one feed")
    if is_lazy(model) and base_dir is None:
        raise ValueError("collect_magnitudes: the model has external tensors; pass base_dir (their folder)")
    marked = _mark_all_outputs(model)
    groups = output_groups(marked, max_output_bytes=max_output_bytes, feed=batches[0])
    result = _run_child(marked, batches, _provider_list(providers, trt_plugins), source, base_dir=base_dir,
                        groups=groups)
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
    result.sort(key=lambda p: p[0] != "TensorrtExecutionProvider")  # TensorRT first, as AutoCast orders it
    return result


def _mark_all_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    marked = onnx.ModelProto()
    marked.CopyFrom(model)
    present = {o.name for o in marked.graph.output}
    for node in marked.graph.node:
        for name in node.output:
            if name and name not in present:
                marked.graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    return marked


def _run_child(model: onnx.ModelProto, batches: list[Feed], providers: list[Provider], source: str, *,
               base_dir: Path | None, groups: list[list[str]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="castguard-ref-") as tmp:
        work = Path(tmp)
        if is_lazy(model):   # the graph only; onnxruntime reads the weights from the model's own folder
            (work / "model.onnx").write_bytes(model.SerializeToString())
        else:
            save_model(model, work / "model.onnx")
        batch_files = []
        for index, feed in enumerate(batches):
            path = work / f"batch{index}.npz"
            np.savez(path, allow_pickle=False, **feed)
            batch_files.append(str(path))
        available = [p[0] for p in providers]
        (work / "request.json").write_text(json.dumps(
            {"model": str(work / "model.onnx"), "providers": providers, "batches": batch_files, "groups": groups,
             "external_folder": str(base_dir.resolve()) if is_lazy(model) and base_dir is not None else None}))
        proc = subprocess.run([sys.executable, str(Path(__file__).with_name("refrun.py")), str(work)],
                              capture_output=True, text=True, check=False)
        if proc.returncode < 0:
            name = signal.Signals(-proc.returncode).name
            raise ConversionError(
                where="reference run", step="reference run",
                problem=f"onnxruntime crashed with {name} running the model on {source} ({', '.join(available)})",
                fix="give representative calibration data (calibration_data=...) or skip the run with data_max=inf")
        result_path = work / "result.json"
        if proc.returncode != 0 or not result_path.exists():
            raise ConversionError(where="reference run", step="reference run",
                                  problem=f"the reference process failed (rc={proc.returncode}): "
                                          f"{proc.stderr.strip()[-2000:]}",
                                  fix="check that onnxruntime can load this model")
        result: dict[str, Any] = json.loads(result_path.read_text())
    if "error" in result:
        message = result["error"]
        node = next((m.group(1) for p in _NODE_PATTERNS if (m := p.search(message))), None)
        raise ConversionError(
            where="reference run", step="reference run", node=node,
            problem=f"onnxruntime cannot {result['stage']} the model on {source}: {message.strip()[:1500]}",
            fix="give representative calibration data (calibration_data=... / --calibration_data) "
                "or input shapes, or skip the run with data_max=inf")
    return result
