"""The tensor shapes FLOP counts read: a run's, else onnx shape inference at concrete input shapes.

Shapes come from, in this order: the tensors' shapes in a run (the reference run's magnitudes, or the golden's run);
onnx shape inference with data propagation on a light copy whose graph inputs carry the case's concrete shapes
(so that ``Shape -> Concat -> Reshape`` chains, as torch's GroupNorm export writes around InstanceNormalization,
get real dims); and, when the caller gave no shapes at all, the sizes castguard convert's reference data would take
(:func:`harness.convert.calibration.sized_inputs`: the batch 1, other dynamic dims
:data:`~harness.data.sizing.DYNAMIC_DEFAULT`). A dim none of these knows stays None: the node is not counted and
is named (:class:`harness.convert.flops.FlopCount`), never counted at a guessed size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import onnx

from harness.convert.calibration import sized_inputs
from harness.convert.flops import Scope
from harness.convert.graphinfo import GraphInfo
from harness.core.errors import UserError
from harness.data.protocopy import light_copy
from harness.data.sizing import DYNAMIC_DEFAULT

Shape = tuple[int | None, ...]


@dataclass(frozen=True)
class FlopShapes:
    """Shapes for FLOP counts: ``observed`` (a run's, exact) over ``inferred`` (None = a dim still unknown)."""

    observed: Mapping[str, tuple[int, ...]]
    inferred: Mapping[str, Shape]
    given: bool = True
    """False: the input sizes are castguard's defaults, not the caller's (a run-time trip count stays unknown)."""

    def dims(self, name: str) -> Shape | None:
        if name in self.observed:
            return tuple(self.observed[name])
        return self.inferred.get(name)

    def lookup(self, name: str) -> tuple[int, ...] | None:
        """The shape for a FLOP estimate: None while any dim is unknown (the node is then named, not counted at
        a guessed size)."""
        dims = self.dims(name)
        return None if dims is None or any(d is None for d in dims) else tuple(int(d) for d in dims)  # type: ignore[arg-type]


def flop_scope(info: GraphInfo, known: FlopShapes) -> Scope:
    """Types, shapes and constant values of the top-level graph and the bodies, for FLOPs through control flow;
    at castguard's default input sizes, trip counts read the declared dims (a dynamic one stays a bound)."""

    def declared(name: str) -> tuple[int | None, ...] | None:
        return info.shapes.get(name, info.body_shapes.get(name))

    dims = known.dims if known.given else declared
    return Scope(types={**info.body_types, **info.types}, dims=dims, values={**info.initializers, **info.constants})


def concrete_inputs(
    model: onnx.ModelProto, given: Mapping[str, Sequence[int]] | None = None
) -> dict[str, tuple[int, ...]]:
    """The input shapes castguard convert's random reference data would take (`given` ones as given, the other
    dynamic dims at its defaults); {} where it refuses to size them."""
    try:
        plan = sized_inputs(model, input_shapes=given, dynamic_default=DYNAMIC_DEFAULT)
    except UserError:
        return {}
    return {name: tuple(int(d) for d in dims) for name, dims in plan.shapes.items()}


def flop_shapes(model: onnx.ModelProto, *, shapes: Mapping[str, Sequence[int]] | None) -> FlopShapes:
    """Shapes of every tensor of `model` (bodies included) for its FLOP count; `shapes`: concrete shapes of the
    graph inputs (a run's shapes of any tensors may come along), None: castguard convert's default sizes."""
    observed = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
    if shapes is None:
        observed = concrete_inputs(model)
    if _all_observed(model.graph, observed):  # a run saw every tensor: inference would add nothing
        weights: dict[str, Shape] = {init.name: tuple(init.dims) for init in model.graph.initializer}
        return FlopShapes(observed=observed, inferred=weights, given=True)
    light = light_copy(model)
    for value in light.graph.input:
        dims = observed.get(value.name)
        if dims is None or not value.type.HasField("tensor_type"):
            continue
        shape = value.type.tensor_type.shape
        shape.Clear()
        for size in dims:
            shape.dim.add().dim_value = size
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):  # data propagation is newer code
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False)
    found: dict[str, Shape] = {}
    _collect(inferred.graph, found)
    return FlopShapes(observed=observed, inferred=found, given=shapes is not None)


def _all_observed(graph: onnx.GraphProto, observed: Mapping[str, tuple[int, ...]]) -> bool:
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            return False
        if any(o and o not in observed for o in node.output):
            return False
    return True


def _collect(graph: onnx.GraphProto, found: dict[str, Shape]) -> None:
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and tensor.HasField("shape"):
            found[value.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    for init in graph.initializer:
        found[init.name] = tuple(init.dims)
    for node in graph.node:
        for attr in node.attribute:
            for body in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                _collect(body, found)
