"""A read-only view of a model's top-level graph: tensor types and shapes, producers, consumers, schemas.

Types and shapes come from onnx shape inference (non-strict), run on a light copy whose large
initializers are replaced by external-data stubs (inference only needs their dims), so the view
is cheap to build even for large models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import TensorProto, defs

from harness.convert.weights import Weights
from harness.core.dtypes import FLOAT_TYPES
from harness.data.protocopy import light_copy

DEFAULT_DOMAINS = ("", "ai.onnx")
_TYPE_STR_TO_ELEM = {
    f"tensor({name})": value
    for name, value in (
        ("float", TensorProto.FLOAT),
        ("float16", TensorProto.FLOAT16),
        ("bfloat16", TensorProto.BFLOAT16),
        ("double", TensorProto.DOUBLE),
    )
}

Shape = tuple[int | None, ...]
SigCache = dict[tuple[str, str, int, int, int], "Signature | None"]


@dataclass(frozen=True)
class Signature:
    """Formal parameter binding of one node: per actual input/output, a type variable or a fixed type."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    allowed: Mapping[str, frozenset[int]]
    """type variable -> float element types it allows (only float types are tracked)."""

    def allows(self, param: str, elem: int) -> bool:
        if param in self.allowed:
            return elem in self.allowed[param]
        return _TYPE_STR_TO_ELEM.get(param) == elem

    def is_var(self, param: str) -> bool:
        return param in self.allowed


def domain_of(node: onnx.NodeProto) -> str:
    return "" if node.domain in DEFAULT_DOMAINS else node.domain


def signature(node: onnx.NodeProto, opsets: Mapping[str, int], cache: SigCache) -> Signature | None:
    """The node's schema binding at the model's opset, or None when onnx has no schema for it."""
    domain = domain_of(node)
    version = opsets.get(domain, opsets.get("ai.onnx", 1) if domain == "" else 1)
    key = (node.op_type, domain, version, len(node.input), len(node.output))
    if key in cache:
        return cache[key]
    try:
        schema = defs.get_schema(node.op_type, version, domain)
    except defs.SchemaError:
        cache[key] = None
        return None
    allowed = {
        c.type_param_str: frozenset(_TYPE_STR_TO_ELEM[t] for t in c.allowed_type_strs if t in _TYPE_STR_TO_ELEM)
        for c in schema.type_constraints
    }
    sig = Signature(
        inputs=_bind(schema.inputs, len(node.input)), outputs=_bind(schema.outputs, len(node.output)), allowed=allowed
    )
    cache[key] = sig
    return sig


def _bind(params: Sequence[defs.OpSchema.FormalParameter], count: int) -> tuple[str, ...]:
    if not params:
        return ("",) * count
    return tuple(params[min(i, len(params) - 1)].type_str for i in range(count))


@dataclass(frozen=True)
class GraphInfo:
    """Everything the classifier and converter need to know about the top-level graph."""

    types: Mapping[str, int]
    shapes: Mapping[str, Shape]
    producers: Mapping[str, int]
    consumers: Mapping[str, tuple[int, ...]]
    initializers: Mapping[str, TensorProto]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    opsets: Mapping[str, int]
    constants: Mapping[str, TensorProto] = field(default_factory=dict)
    """Outputs of Constant nodes that carry a ``value`` tensor."""
    weights: Weights = field(default_factory=lambda: Weights(None))
    """Figures of initializer/constant values; streams the external ones (lazy models) from their folder."""
    body_types: Mapping[str, int] = field(default_factory=dict)
    body_shapes: Mapping[str, Shape] = field(default_factory=dict)
    """Inferred types and shapes of the tensors inside If/Loop/Scan bodies (recursively), for FLOP counts."""

    def is_float(self, name: str) -> bool:
        return self.types.get(name) in FLOAT_TYPES

    def constant(self, name: str) -> TensorProto | None:
        """The initializer or Constant value named `name`, or None."""
        return self.initializers.get(name) or self.constants.get(name)

    def constant_absmax(self, name: str) -> float | None:
        """max |value| of the float initializer or Constant named `name`; None when there is no such tensor."""
        tensor = self.constant(name)
        if tensor is None or tensor.data_type not in FLOAT_TYPES:
            return None
        return self.weights.absmax(tensor)


def opset_map(model: onnx.ModelProto) -> dict[str, int]:
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}


def _shape_of(value_type: onnx.TypeProto) -> Shape | None:
    if not value_type.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in value_type.tensor_type.shape.dim)


def _index_declared(graph: onnx.GraphProto, types: dict[str, int], shapes: dict[str, Shape]) -> None:
    """The element type and shape of every tensor `graph` declares (inputs, value_info, outputs)."""
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
            shape = _shape_of(vi.type)
            if shape is not None:
                shapes[vi.name] = shape


def build_info(
    model: onnx.ModelProto, *, observed_types: Mapping[str, int] | None = None, base_dir: Path | None = None
) -> GraphInfo:
    """Infer types/shapes (non-strict) and index producers and consumers of the top-level graph.

    `observed_types` (from the reference run) fill in tensors that onnx inference cannot type (custom ops);
    `base_dir`: the folder external tensors (a lazily loaded model) are read from.
    """
    inferred = onnx.shape_inference.infer_shapes(light_copy(model), strict_mode=False)
    types: dict[str, int] = {}
    shapes: dict[str, Shape] = {}
    graph = inferred.graph
    _index_declared(graph, types, shapes)
    for name, elem in (observed_types or {}).items():
        types.setdefault(name, elem)
    initializers = {init.name: init for init in model.graph.initializer}
    for init in model.graph.initializer:
        types[init.name] = init.data_type
        shapes[init.name] = tuple(init.dims)
    producers: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    constants: dict[str, TensorProto] = {}
    for index, node in enumerate(model.graph.node):
        for name in node.input:
            if name:
                consumers.setdefault(name, []).append(index)
        for name in node.output:
            if name:
                producers[name] = index
        if (
            node.op_type == "Constant"
            and domain_of(node) == ""
            and node.attribute
            and node.attribute[0].name == "value"
        ):
            constants[node.output[0]] = node.attribute[0].t
    init_names = set(initializers)
    body_types: dict[str, int] = {}
    body_shapes: dict[str, Shape] = {}
    _index_bodies(graph, body_types, body_shapes)
    return GraphInfo(
        types=types,
        shapes=shapes,
        producers=producers,
        consumers={k: tuple(v) for k, v in consumers.items()},
        initializers=initializers,
        inputs=tuple(i.name for i in model.graph.input if i.name not in init_names),
        outputs=tuple(o.name for o in model.graph.output),
        opsets=opset_map(model),
        constants=constants,
        weights=Weights(base_dir),
        body_types=body_types,
        body_shapes=body_shapes,
    )


def _index_bodies(graph: onnx.GraphProto, types: dict[str, int], shapes: dict[str, Shape]) -> None:
    """Types and shapes of every tensor declared inside the bodies of `graph`'s nodes (names are unique
    across nested scopes in ONNX)."""
    for node in graph.node:
        for attr in node.attribute:
            bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for body in bodies:
                _index_declared(body, types, shapes)
                for init in body.initializer:
                    types[init.name], shapes[init.name] = init.data_type, tuple(init.dims)
                _index_bodies(body, types, shapes)
