"""What the graph does with each integer input: an index into a table (and how many rows it has), a shape-like
operand, or unknown. The input recipes draw integer inputs by it (:mod:`harness.data.recipes`), and the reference
data of a conversion keeps shape operands exact (:mod:`harness.convert.refdata`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import onnx

from harness.data.feeds import INT_TYPES, input_specs

# Ops that pass an integer tensor's values on unchanged (an index input may be reshaped or cast first).
_PASS_VALUES = {
    "Cast": (0,),
    "Reshape": (0,),
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Flatten": (0,),
    "Identity": (0,),
    "Expand": (0,),
    "Transpose": (0,),
    "Concat": None,
}
# Operands that are shapes, axes, sizes or counts: input positions per op type.
_SHAPE_OPERANDS = {
    "Reshape": (1,),
    "Expand": (1,),
    "Tile": (1,),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "Split": (1,),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "Slice": (1, 2, 3, 4),
    "Pad": (1, 3),
    "ConstantOfShape": (0,),
    "TopK": (1,),
    "Range": (0, 1, 2),
    "OneHot": (1,),
    "CumSum": (1,),
    "ReduceSum": (1,),
    "ReduceMean": (1,),
    "ReduceMax": (1,),
    "ReduceMin": (1,),
    "ReduceProd": (1,),
    "ReduceL1": (1,),
    "ReduceL2": (1,),
    "ReduceLogSumExp": (1,),
    "ReduceSumSquare": (1,),
    "ReduceLogSum": (1,),
    "Trilu": (1,),
    "CenterCropPad": (1, 2),
    "Col2Im": (1, 2),
}
_INDEX_OPERANDS = {"Gather": (1, 0), "GatherElements": (1, 0), "GatherND": (1, None)}  # (indices, data) positions


@dataclass(frozen=True)
class InputRole:
    """What the graph does with an integer input: ``index`` (rows of the tables it indexes), ``shape`` (a shape,
    axes, sizes... operand) or ``unknown``; ``detail`` says which node, for the report."""

    kind: str
    detail: str = ""
    rows: int | None = None


def input_roles(model: onnx.ModelProto) -> dict[str, InputRole]:
    """Role of every integer graph input, found by following it through value-preserving ops (Cast, Reshape...)."""
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in model.graph.node:
        for position, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, position))
    inits = {t.name: tuple(t.dims) for t in model.graph.initializer}
    consts = {
        out: tuple(a.t.dims)
        for n in model.graph.node
        if n.op_type == "Constant"
        for a in n.attribute
        if a.name == "value"
        for out in n.output[:1]
    }
    tables = {**inits, **consts}
    roles: dict[str, InputRole] = {}
    for spec in input_specs(model):
        if spec.elem_type not in INT_TYPES:
            continue
        roles[spec.name] = _role(spec.name, consumers, tables)
    return roles


def _role(
    name: str, consumers: Mapping[str, list[tuple[onnx.NodeProto, int]]], tables: Mapping[str, tuple[int, ...]]
) -> InputRole:
    rows: list[tuple[int, str]] = []
    seen, todo = {name}, [name]
    while todo:
        tensor = todo.pop()
        for node, position in consumers.get(tensor, []):
            label = f"{node.op_type} {node.name or node.output[0]!r}"
            if position in _SHAPE_OPERANDS.get(node.op_type, ()):
                return InputRole("shape", f"operand {position} of {label}")
            index_data = _INDEX_OPERANDS.get(node.op_type)
            if index_data is not None and position == index_data[0]:
                data = node.input[0] if node.input else ""
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                dims = tables.get(data)
                if node.op_type == "GatherND" or dims is None or not dims:
                    return InputRole("unknown", f"indexes {label}, whose table is computed in the graph")
                rows.append((dims[axis % len(dims)], label))
                continue
            passes = node.op_type in _PASS_VALUES and (
                _PASS_VALUES[node.op_type] is None or position in (_PASS_VALUES[node.op_type] or ())
            )
            if passes:
                for out in node.output[:1]:
                    if out not in seen:
                        seen.add(out)
                        todo.append(out)
    if rows:
        smallest = min(rows)
        return InputRole("index", f"indices of {', '.join(label for _, label in sorted(set(rows)))}", rows=smallest[0])
    return InputRole("unknown")
