"""TensorRT engine-inspector JSON -> per-layer precision report (``precision_diff`` compares it with the ONNX types).

Pure code: nothing here imports tensorrt, so it is tested on machines without a GPU.

Two schemas exist (``docs/runtime-facts.md`` §3.2):

* **10.x**: ``{"Layers": [...], "Bindings": ["in", "out"]}``; each layer tensor has a combined
  ``"Format/Datatype"`` string (``"Row major linear FP16 format"``, or just ``"Half"``); with
  ``ProfilingVerbosity.LAYER_NAMES_ONLY`` every layer is a bare name string.
* **11.x**: ``"Bindings"`` became ``"I/O Tensors"`` (objects with ``IOMode``/``DataType``), and the
  per-tensor field is split into ``"Datatype"`` and ``"Format"``. Keys are matched case-insensitively.

A layer maps back to ONNX nodes through its ``Metadata`` (``"[ONNX Layer: name]"``, several joined by
U+001E for fused layers) or, failing that, through its ``Name`` split on ``" + "``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.core.errors import InputDataError, RunnerError
from harness.runners.tensorrt.datatypes import FLOAT_PRECISIONS, LOW_PRECISIONS, precision_from_text

_ONNX_LAYER = re.compile(r"^\[ONNX Layer: (.*)\]$", re.DOTALL)
_FOREIGN_NODE = re.compile(r"^\{ForeignNode\[(.+)\.\.\.(.+)\]\}$")

LayerKind = Literal["compute", "reformat", "cast"]


def _norm(key: str) -> str:
    return re.sub(r"[\s_]", "", key).casefold()


def _get(obj: Mapping[str, Any], *keys: str) -> Any:
    """SweepPoint- and space-insensitive lookup of the first key present."""
    wanted = [_norm(k) for k in keys]
    found = {_norm(k): v for k, v in obj.items()}
    return next((found[w] for w in wanted if w in found), None)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...] | None
    precision: str | None  # "fp32", "fp16", "bf16", "int8", ... or None when the text names no type
    text: str  # the raw datatype/format description


@dataclass(frozen=True)
class LayerInfo:
    name: str
    layer_type: str  # "" with LAYER_NAMES_ONLY
    kind: LayerKind
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    onnx_nodes: tuple[str, ...]  # from Metadata, else from Name split on " + "
    node_range: tuple[str, str] | None  # Myelin "{ForeignNode[first...last]}"
    tactic: str

    @property
    def precision(self) -> str | None:
        """The layer's data precision: its float outputs' type, else its float inputs' (e.g. a comparison)."""
        for tensors in (self.outputs, self.inputs):
            found = sorted({t.precision for t in tensors if t.precision in FLOAT_PRECISIONS})
            if found:
                return "+".join(found)
        return None


@dataclass(frozen=True)
class IOTensor:
    name: str
    mode: Literal["input", "output", "unknown"]
    precision: str | None  # None in the 10.x schema, whose Bindings are bare names
    dims: tuple[int, ...] | None


@dataclass(frozen=True)
class PrecisionReport:
    """What the engine really runs, per layer."""

    schema: Literal["10.x", "11.x"]
    detailed: bool  # False for LAYER_NAMES_ONLY dumps, which carry no types
    layers: tuple[LayerInfo, ...]
    io_tensors: tuple[IOTensor, ...]

    def compute_layers(self) -> tuple[LayerInfo, ...]:
        return tuple(layer for layer in self.layers if layer.kind == "compute")

    def histogram(self) -> dict[str, int]:
        """Compute layers per precision (``"none"`` for layers without float tensors)."""
        return dict(Counter(layer.precision or "none" for layer in self.compute_layers()))

    def low_precision_share(self) -> float:
        """Fraction of compute layers whose data is fp16/bf16/fp8/fp4 (0.0 when there are none)."""
        typed = [layer.precision for layer in self.compute_layers() if layer.precision]
        low = [p for p in typed if set(p.split("+")) & LOW_PRECISIONS]
        return len(low) / len(typed) if typed else 0.0

    def conversion_layers(self) -> tuple[LayerInfo, ...]:
        return tuple(layer for layer in self.layers if layer.kind != "compute")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "detailed": self.detailed,
            "histogram": self.histogram(),
            "low_precision_share": self.low_precision_share(),
            "layers": [
                {
                    "name": layer.name,
                    "type": layer.layer_type,
                    "kind": layer.kind,
                    "precision": layer.precision,
                    "onnx_nodes": list(layer.onnx_nodes),
                }
                for layer in self.layers
            ],
            "io_tensors": [{"name": t.name, "mode": t.mode, "precision": t.precision} for t in self.io_tensors],
        }


# ---------------------------------------------------------------- parsing


def _dims(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(d, int) for d in value):
        return tuple(value)
    return None


def _tensor(obj: Any, *, where: str) -> TensorInfo:
    if not isinstance(obj, Mapping):
        raise RunnerError(f"{where}: expected a tensor object, got {type(obj).__name__}")
    combined = _get(obj, "Format/Datatype")
    if isinstance(combined, str):
        text = combined
        precision = precision_from_text(combined)
    else:  # 11.x: split keys; the Datatype names the type, the Format may repeat it
        dtype, fmt = _get(obj, "Datatype", "DataType"), _get(obj, "Format")
        text = " | ".join(str(v) for v in (dtype, fmt) if v is not None)
        precision = precision_from_text(str(dtype)) if dtype is not None else None
        if precision is None and fmt is not None:
            precision = precision_from_text(str(fmt))
    return TensorInfo(
        name=str(_get(obj, "Name") or ""), dims=_dims(_get(obj, "Dimensions")), precision=precision, text=text
    )


def _layer_kind(name: str, layer_type: str, origin: str) -> LayerKind:
    if layer_type.casefold() == "reformat" or origin.upper() == "REFORMAT" or name.startswith("Reformatting "):
        return "reformat"
    if layer_type.casefold() == "cast" or origin.upper() == "CAST":
        return "cast"
    return "compute"


def onnx_nodes_of(name: str, metadata: str) -> tuple[str, ...]:
    """ONNX node names of one engine layer: from ``[ONNX Layer: x]`` metadata, else ``Name`` split on " + "."""
    nodes = []
    for part in metadata.split("\x1e"):
        match = _ONNX_LAYER.match(part.strip())
        if match:
            nodes.append(match.group(1))
    if nodes or metadata.strip():
        return tuple(nodes)
    if name.startswith(("Reformatting ", "{ForeignNode[", "__myl_")):
        return ()
    return tuple(part.strip() for part in name.split(" + ") if part.strip())


def _layer(obj: Any, *, index: int) -> LayerInfo:
    where = f"inspector layer {index}"
    if isinstance(obj, str):  # LAYER_NAMES_ONLY
        return LayerInfo(
            name=obj,
            layer_type="",
            kind=_layer_kind(obj, "", ""),
            inputs=(),
            outputs=(),
            onnx_nodes=onnx_nodes_of(obj, ""),
            node_range=_foreign_range(obj),
            tactic="",
        )
    if not isinstance(obj, Mapping):
        raise RunnerError(f"{where}: expected a layer object or name, got {type(obj).__name__}")
    name = str(_get(obj, "Name") or "")
    layer_type = str(_get(obj, "LayerType") or "")
    tensors = {
        key: tuple(_tensor(t, where=f"{where} ({name}) {key}") for t in (_get(obj, key) or []))
        for key in ("Inputs", "Outputs")
    }
    tactic = _get(obj, "TacticName", "TacticValue")
    return LayerInfo(
        name=name,
        layer_type=layer_type,
        kind=_layer_kind(name, layer_type, str(_get(obj, "Origin") or "")),
        inputs=tensors["Inputs"],
        outputs=tensors["Outputs"],
        onnx_nodes=onnx_nodes_of(name, str(_get(obj, "Metadata") or "")),
        node_range=_foreign_range(name),
        tactic="" if tactic is None else str(tactic),
    )


def _foreign_range(name: str) -> tuple[str, str] | None:
    match = _FOREIGN_NODE.match(name)
    return (match.group(1), match.group(2)) if match else None


def _io_from_bindings(names: Sequence[Any], layers: Sequence[LayerInfo]) -> tuple[IOTensor, ...]:
    """10.x ``Bindings`` are bare names: a binding no layer produces is an input."""
    produced = {t.name for layer in layers for t in layer.outputs}
    consumed = {t.name for layer in layers for t in layer.inputs}
    result = []
    for raw in names:
        name = str(raw)
        mode: Literal["input", "output", "unknown"] = (
            "output" if name in produced else "input" if name in consumed else "unknown"
        )
        result.append(IOTensor(name=name, mode=mode, precision=None, dims=None))
    return tuple(result)


def _io_from_objects(objs: Sequence[Any]) -> tuple[IOTensor, ...]:
    result = []
    for obj in objs:
        if not isinstance(obj, Mapping):
            raise RunnerError(f"inspector 'I/O Tensors': expected objects, got {type(obj).__name__}")
        raw_mode = str(_get(obj, "IOMode") or "").casefold()
        mode: Literal["input", "output", "unknown"] = (
            "input" if raw_mode == "input" else "output" if raw_mode == "output" else "unknown"
        )
        dtype = _get(obj, "DataType", "Datatype")
        result.append(
            IOTensor(
                name=str(_get(obj, "Name") or ""),
                mode=mode,
                precision=precision_from_text(str(dtype)) if dtype is not None else None,
                dims=_dims(_get(obj, "Dimensions")),
            )
        )
    return tuple(result)


def parse_inspector_json(data: str | bytes | Mapping[str, Any]) -> PrecisionReport:
    """Parse ``IEngineInspector.get_engine_information(JSON)`` output (10.x or 11.x); RunnerError if malformed."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as err:
            raise RunnerError(f"engine inspector output is not JSON: {err}") from err
    if not isinstance(data, Mapping) or not isinstance(_get(data, "Layers"), list):
        raise RunnerError(
            "engine inspector JSON has no 'Layers' list; was the engine built with "
            "profiling_verbosity DETAILED (or LAYER_NAMES_ONLY)?"
        )
    layers = tuple(_layer(obj, index=i) for i, obj in enumerate(_get(data, "Layers")))
    io_objects = _get(data, "I/O Tensors", "IOTensors")
    bindings = _get(data, "Bindings")
    if isinstance(io_objects, list):
        schema: Literal["10.x", "11.x"] = "11.x"
        io = _io_from_objects(io_objects)
    else:
        split_keys = any(
            _get(raw, "Format/Datatype") is None and _get(raw, "Datatype") is not None
            for obj in _get(data, "Layers")
            if isinstance(obj, Mapping)
            for raw in (_get(obj, "Outputs") or [])
            if isinstance(raw, Mapping)
        )
        schema = "11.x" if split_keys else "10.x"
        io = _io_from_bindings(bindings if isinstance(bindings, list) else [], layers)
    detailed = any(not isinstance(obj, str) for obj in _get(data, "Layers"))
    return PrecisionReport(schema=schema, detailed=detailed, layers=layers, io_tensors=io)


def load_inspector_json(path: Path) -> PrecisionReport:
    """Read a saved inspector dump (e.g. ``trtexec --exportLayerInfo``); InputDataError names the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        return parse_inspector_json(text)
    except (OSError, UnicodeDecodeError, RunnerError) as err:
        raise InputDataError(
            where=path,
            problem=f"cannot read the engine layer information: {err}",
            fix="pass the JSON written by IEngineInspector or trtexec --exportLayerInfo "
            "with --profilingVerbosity=detailed",
        ) from err
