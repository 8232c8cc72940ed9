"""onnx's checker on a model :func:`~harness.data.onnxfile.load_model` read: custom ops and TensorRT plugins in
onnx's own domains tolerated (their schema is the converter's to judge), external weights checked apart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import external_data_helper

from harness.core.errors import ModelError

_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
_UNREGISTERED = "castguard.unregistered"


def check_graph(model: onnx.ModelProto, path: Path, *, lazy: bool, oversize: bool) -> None:
    """onnx's checker on the graph: everything but the schema of ops onnx does not know (custom ops and TensorRT
    plugins in the default domain are the converter's to judge: ``custom_ops``), and but external data, which
    :func:`~harness.data.onnxfile.check_external_data` has checked (confined, present, long enough). ``lazy``:
    some weights are still on disk; ``oversize``: the weights in memory are past protobuf's 2 GB (the checker then
    reads the file)."""
    try:
        if lazy or any(_unregistered(n) for n in _all_nodes(model.graph)):
            onnx.checker.check_model(_checkable(model))
        else:  # the parsed proto holds everything (no second read); past protobuf's 2 GB, the file
            onnx.checker.check_model(str(path) if oversize else model)
    except onnx.checker.ValidationError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(
            where=path,
            problem=f"not a valid ONNX model: {first}",
            fix="re-export the model; `python -c \"import onnx; onnx.checker.check_model('"
            f"{path.name}')\"` shows the details",
        ) from err


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
    """A copy for the checker: the main graph's external initializers become graph inputs of their type and
    shape (their files are checked apart), and ops onnx has no schema for move to a domain of their own."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    external = [t for t in graph.initializer if external_data_helper.uses_external_data(t)]
    kept = [t for t in graph.initializer if not external_data_helper.uses_external_data(t)]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    inputs = {i.name for i in graph.input}
    graph.input.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in external if t.name not in inputs
    )
    renamed = False
    for node in _all_nodes(graph):
        if _unregistered(node):
            node.domain, renamed = _UNREGISTERED, True
    if renamed:
        copy.opset_import.append(onnx.helper.make_opsetid(_UNREGISTERED, 1))
    return copy
