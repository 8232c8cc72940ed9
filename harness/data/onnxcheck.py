"""onnx's checker on a model :func:`~harness.data.onnxfile.load_model` read: custom ops and TensorRT plugins in
onnx's own domains tolerated (their schema is the converter's to judge), the weights' bytes checked apart (their
size here, external files by the loader), so that the checker never gets them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import external_data_helper

from harness.core.dtypes import FLOAT_TYPES, INT_TYPES
from harness.core.errors import ModelError
from harness.data.protocopy import STUB_BYTES, copy_except, value_bytes

_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
_UNREGISTERED = "castguard.unregistered"
_PLAIN = FLOAT_TYPES | INT_TYPES | {onnx.TensorProto.UINT64}
"""Types whose ``raw_data`` is one item per element of numpy's size (no packed 4-bit, no strings)."""


def check_graph(model: onnx.ModelProto, path: Path) -> None:
    """onnx's checker on the graph: everything but the schema of ops onnx does not know (custom ops and TensorRT
    plugins in the default domain are the converter's to judge: ``custom_ops``), and but the weights' bytes: the
    checker gets a copy without them (:func:`_checkable`; a 470 MB decoder was serialized and parsed again only to
    be checked, 1.3 s at every start), and the one thing it reads in them, that each plain tensor's ``raw_data``
    has the size its shape and type need, is checked here. External data is
    :func:`~harness.data.onnxfile.check_external_data`'s (confined, present, long enough)."""
    try:
        _check_sizes(model.graph)
        onnx.checker.check_model(_checkable(model))
    except onnx.checker.ValidationError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(
            where=path,
            problem=f"not a valid ONNX model: {first}",
            fix="re-export the model; `python -c \"import onnx; onnx.checker.check_model('"
            f"{path.name}')\"` shows the details",
        ) from err


def _left_out(tensor: onnx.TensorProto) -> bool:
    """A main-graph initializer the checker's copy does without: external, or in memory as ``raw_data`` of a plain
    type above :data:`~harness.data.protocopy.STUB_BYTES` (its size checked by :func:`_check_sizes`)."""
    if external_data_helper.uses_external_data(tensor):
        return True
    return tensor.data_type in _PLAIN and tensor.HasField("raw_data") and value_bytes(tensor) > STUB_BYTES


def _check_sizes(graph: onnx.GraphProto) -> None:
    """What onnx's checker would say of the bytes of the initializers :func:`_checkable` leaves out."""
    for tensor in graph.initializer:
        if _left_out(tensor) and not external_data_helper.uses_external_data(tensor):
            have, need = len(tensor.raw_data), value_bytes(tensor)  # one copy of the bytes, let go at once
            if have != need:
                raise onnx.checker.ValidationError(
                    f"TensorProto (tensor name: {tensor.name}) raw_data size ({have} bytes) does not match the "
                    f"declared shape and type ({need} bytes required)."
                )


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for sub in (attribute.g, *attribute.graphs) if attribute.HasField("g") else attribute.graphs:
                yield from _all_nodes(sub)


def _unregistered(node: onnx.NodeProto) -> bool:
    """An op in an onnx domain that onnx has no schema for (a custom op or a TensorRT plugin)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    return node.domain in _STANDARD_DOMAINS and not onnx.defs.has(node.op_type, domain)


def _checkable(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy for the checker, without the weights' bytes: the main graph's :func:`_left_out` initializers become
    graph inputs of their type and shape, and ops onnx has no schema for move to a domain of their own."""
    copy: onnx.ModelProto = copy_except(model, "graph")
    copy.graph.CopyFrom(copy_except(model.graph, "initializer"))
    graph = copy.graph
    inputs = {i.name for i in graph.input}
    for tensor in model.graph.initializer:
        if not _left_out(tensor):
            graph.initializer.append(tensor)
        elif tensor.name not in inputs:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
            inputs.add(tensor.name)
    renamed = False
    for node in _all_nodes(graph):
        if _unregistered(node):
            node.domain, renamed = _UNREGISTERED, True
    if renamed:
        copy.opset_import.append(onnx.helper.make_opsetid(_UNREGISTERED, 1))
    return copy
