"""Validate a converted model: onnx checker with full_check (which runs strict type and shape inference),
then graph I/O names and types.

Every failure is a ConversionError naming the step and, where the message allows, the node.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import onnx
from onnx import TensorProto

from harness.convert.options import ConvertOptions
from harness.core.dtypes import FLOAT_TYPES
from harness.core.errors import ConversionError
from harness.data.protocopy import STUB_LOCATION, light_copy

_NODE_IN_MESSAGE = (
    re.compile(r"Name: (\S+) OpType"),
    re.compile(r"node name: ([^\s,)]+)"),
    re.compile(r"[Nn]ode \(([^)]+)\)"),
    re.compile(r"node ([^\s]+) "),
)
LOG = logging.getLogger("harness.convert")
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


def _check(model: onnx.ModelProto) -> onnx.ModelProto:
    """What ``check_model(full_check=True)`` does: the checker, then strict shape and type inference
    (check_type=True), run on a light copy (big initializers as external-data stubs: their values play no
    part in either, and serializing them would cost seconds on a large model). Returns the inferred copy."""
    light = light_copy(model)
    with tempfile.TemporaryDirectory(prefix="castguard-check-") as tmp:
        (Path(tmp) / STUB_LOCATION).touch()
        onnx.save_model(light, str(Path(tmp) / "model.onnx"))
        onnx.checker.check_model(str(Path(tmp) / "model.onnx"))
    return onnx.shape_inference.infer_shapes(light, check_type=True, strict_mode=True)


def _relaxed_check(model: onnx.ModelProto) -> onnx.ModelProto:
    light = light_copy(model)
    with tempfile.TemporaryDirectory(prefix="castguard-check-") as tmp:
        (Path(tmp) / STUB_LOCATION).touch()
        onnx.save_model(light, str(Path(tmp) / "model.onnx"))
        onnx.checker.check_model(str(Path(tmp) / "model.onnx"))
    return onnx.shape_inference.infer_shapes(light, strict_mode=False)


def strict_error(model: onnx.ModelProto) -> str | None:
    """The strict check's message for `model` (None: it passes). Used on the input, to tell its own faults
    from the converter's."""
    try:
        _check(model)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        return str(err).strip()
    return None


def validate(
    model: onnx.ModelProto,
    *,
    original_inputs: Mapping[str, int],
    original_outputs: Mapping[str, int],
    options: ConvertOptions,
    input_error: Callable[[], str | None] = lambda: None,
) -> onnx.ModelProto:
    """Check `model`, converted with `options`; returns its strictly inferred light copy (types and shapes of every
    tensor). The graph I/O types are the originals, or ``options``' low type where the I/O is not kept.

    `input_error` gives the strict check's message on the (prepared) input model; when the converted model
    fails with that very message, the fault is the input's (an onnx function body that fails strict inference
    at this opset, say): a warning says so, and the model is checked by the checker and non-strict inference."""
    keep_io_types, low = options.keeps_io_types, options.low_elem
    try:
        inferred = _check(model)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        if str(err).strip() == input_error():
            LOG.warning(
                "the input model already fails onnx's strict type and shape inference with the same "
                "error (%s): the converted model is checked without it",
                str(err).strip()[:300],
            )
            return _relaxed_check(model)
        raise ConversionError(
            where="converted model",
            step="validate: onnx.checker (full_check: strict type and shape inference)",
            node=_node_in(str(err)),
            problem=str(err).strip()[:1500],
            fix=FIX,
        ) from None
    inputs, outputs = io_types(model)
    for role, before, after in (("input", original_inputs, inputs), ("output", original_outputs, outputs)):
        if list(before) != list(after):
            raise ConversionError(
                where="converted model",
                step=f"validate: graph {role} names",
                problem=f"graph {role}s changed from {list(before)} to {list(after)}",
                fix=FIX,
            )
        for name, elem in before.items():
            want = expected_io_type(elem, keep_io_types=keep_io_types, low=low) if elem in FLOAT_TYPES else elem
            if after[name] != want:
                raise ConversionError(
                    where="converted model",
                    step=f"validate: graph {role} types",
                    node=name,
                    problem=f"{role} {name!r} is {TensorProto.DataType.Name(after[name])}, expected "
                    f"{TensorProto.DataType.Name(want)} (keep_io_types={keep_io_types})",
                    fix=FIX,
                )
    return inferred
