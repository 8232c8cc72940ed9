"""One model holding the FP32 model and its emulated conversion (:func:`merge_halves`), for the divergence
profile's side-by-side graph (:mod:`harness.diagnose.sidebyside`), and the loading of its weights when the two
halves keep them in different folders (:func:`materialise`)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.convert.reductions import default_opset
from harness.core.dtypes import LOW_TYPES
from harness.data.onnxfile import external_tensors, is_lazy, tensor_array
from harness.data.protocopy import values_left_out
from harness.runners.emulate import emulation_model

LOW = "castguard_low/"
"""Prefix of the emulated conversion's names in the side-by-side graph."""
MIN_SIDE_OPSET = 11
"""Equal on float64 (the inf-matching rule) needs opset 11."""


def merge_halves(
    reference: onnx.ModelProto, converted: onnx.ModelProto, *, values: dict[str, TensorProto] | None = None
) -> tuple[onnx.ModelProto, int]:
    """One model holding both, and how many nodes the FP32 half has: the reference as it is (first), the emulated
    conversion prefixed, its inputs fed from the reference's inputs cast as the feeds would be
    (:func:`harness.data.feeds.cast_feeds`). ``values`` (a session in host memory, which writes the model out): where
    neither half keeps weights on disk and both share an opset, the model's big in-memory initializers are left
    without values and ``values`` gets them by name (the reference's own tensors and the emulated conversion's),
    so that the merged model never holds a copy of both halves' weights (:func:`values_left_out`)."""
    low = emulation_model(converted)
    light = values is not None and default_opset(reference) == default_opset(low)
    light = light and not is_lazy(reference) and not is_lazy(low)
    if light:
        ref, kept = values_left_out(reference)
    else:
        ref, kept = onnx.ModelProto(), {}
        ref.CopyFrom(reference)
    opset = default_opset(low)
    if default_opset(ref) != opset:
        ref = onnx.version_converter.convert_version(ref, opset or 0)
    if opset is None or opset < MIN_SIDE_OPSET:
        raise ValueError(f"opset {opset} (the side-by-side comparison needs {MIN_SIDE_OPSET} or later)")
    declared = {i.name: i.type.tensor_type.elem_type for i in converted.graph.input}
    onnx.compose.add_prefix(low, LOW, inplace=True)
    ref_inputs = {i.name for i in ref.graph.input}
    graph = ref.graph
    ref_nodes = len(graph.node)
    for value in low.graph.input:
        name = value.name[len(LOW) :]
        if name not in ref_inputs:
            raise ValueError(f"the conversion's input {name!r} is not an input of the FP32 model")
        elem = declared.get(name, 0)
        if elem in LOW_TYPES:
            graph.node.append(helper.make_node("Cast", [name], [value.name + "/low"], to=elem))
            graph.node.append(helper.make_node("Cast", [value.name + "/low"], [value.name], to=TensorProto.FLOAT))
        else:
            graph.node.append(helper.make_node("Identity", [name], [value.name]))
    graph.node.extend(low.graph.node)
    if light:
        low_light, low_kept = values_left_out(low)
        graph.initializer.extend(low_light.graph.initializer)
        kept.update(low_kept)
    else:
        graph.initializer.extend(low.graph.initializer)
    graph.sparse_initializer.extend(low.graph.sparse_initializer)
    seen = {(o.domain, o.version) for o in ref.opset_import}
    ref.opset_import.extend(o for o in low.opset_import if (o.domain, o.version) not in seen)
    domains = [o.domain or "ai.onnx" for o in ref.opset_import]
    if len(domains) != len(set(domains)):
        raise ValueError("the two models import different versions of one operator set")
    ref.ir_version = max(ref.ir_version, low.ir_version)
    del graph.value_info[:]
    if values is not None:
        values.update(kept)
    return ref, ref_nodes


def materialise(model: onnx.ModelProto, prefix: str, base_dir: Path) -> None:
    """Load the external tensors whose names start with ``prefix`` into ``model`` (pending casts applied): for a
    side-by-side model whose two halves keep their weights in different folders."""
    for tensor in external_tensors(model):
        if tensor.name.startswith(prefix):
            tensor.CopyFrom(numpy_helper.from_array(tensor_array(tensor, base_dir), tensor.name))
