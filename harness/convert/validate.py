"""Validate a converted model: onnx checker with full_check (which runs strict type and shape inference),
then graph I/O names and types.

Every failure is a ConversionError naming the step and, where the message allows, the node.
"""
from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

import onnx
from onnx import TensorProto

from harness.data.onnxfile import EXTERNAL_DATA_ABOVE, is_lazy, save_model, stub_copy, weights_size
from harness.dtypes import FLOAT_TYPES
from harness.errors import ConversionError

_NODE_IN_MESSAGE = (re.compile(r"Name: (\S+) OpType"), re.compile(r"node name: ([^\s,)]+)"), re.compile(r"[Nn]ode \(([^)]+)\)"),
                    re.compile(r"node ([^\s]+) "))
FIX = "this is a converter bug or an unsupported construct: exclude the node (nodes_to_exclude) and report it"


def _node_in(message: str) -> str | None:
    return next((m.group(1) for p in _NODE_IN_MESSAGE if (m := p.search(message))), None)


def io_types(model: onnx.ModelProto) -> tuple[dict[str, int], dict[str, int]]:
    """(real graph inputs, graph outputs) -> element type; initializers listed as inputs excluded."""
    inits = {i.name for i in model.graph.initializer}
    inputs = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input if vi.name not in inits}
    outputs = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.output}
    return inputs, outputs


def expected_io_type(original: int, *, keep_io_types: bool, low: int) -> int:
    if keep_io_types or original not in (TensorProto.FLOAT, TensorProto.DOUBLE):
        return original
    return low


def _check(model: onnx.ModelProto) -> None:
    """check_model(full_check=True): the checker plus strict shape and type inference (check_type=True).
    Models near protobuf's 2 GiB limit are checked from a temporary external-data copy, lazy models from a
    graph-only copy (types and dims of their weights, never the bytes)."""
    if not is_lazy(model) and weights_size(model) < EXTERNAL_DATA_ABOVE:
        onnx.checker.check_model(model, full_check=True)
        return
    with tempfile.TemporaryDirectory(prefix="castguard-check-") as tmp:
        if is_lazy(model):   # weights on disk: check the graph with its external tensors pointing at an empty file
            (Path(tmp) / "stub.data").write_bytes(b"")
            onnx.save_model(stub_copy(model, "stub.data"), str(Path(tmp) / "model.onnx"))
        else:
            save_model(model, Path(tmp) / "model.onnx")
        onnx.checker.check_model(str(Path(tmp) / "model.onnx"), full_check=True)


def validate(model: onnx.ModelProto, *, original_inputs: Mapping[str, int], original_outputs: Mapping[str, int],
             keep_io_types: bool, low: int) -> None:
    try:
        _check(model)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise ConversionError(where="converted model", step="validate: onnx.checker (full_check: strict type and "
                                                             "shape inference)",
                              node=_node_in(str(err)), problem=str(err).strip()[:1500], fix=FIX) from None
    inputs, outputs = io_types(model)
    for role, before, after in (("input", original_inputs, inputs), ("output", original_outputs, outputs)):
        if list(before) != list(after):
            raise ConversionError(where="converted model", step=f"validate: graph {role} names",
                                  problem=f"graph {role}s changed from {list(before)} to {list(after)}", fix=FIX)
        for name, elem in before.items():
            want = expected_io_type(elem, keep_io_types=keep_io_types, low=low) if elem in FLOAT_TYPES else elem
            if after[name] != want:
                raise ConversionError(
                    where="converted model", step=f"validate: graph {role} types", node=name,
                    problem=f"{role} {name!r} is {TensorProto.DataType.Name(after[name])}, expected "
                            f"{TensorProto.DataType.Name(want)} (keep_io_types={keep_io_types})", fix=FIX)
