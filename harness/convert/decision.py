"""A node's precision decision and the facts every rule reads: the node's existing float type and whether its
schema allows a low type at the model's opset (:mod:`harness.convert.classify` applies the rules)."""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import TensorProto

from harness.convert.graphinfo import GraphInfo, Signature, domain_of
from harness.core.dtypes import ELEM_NAMES, LOW_ELEMS


@dataclass(frozen=True)
class Decision:
    """elem: the type the node's float tensors get; None = keep the node's existing types."""

    elem: int | None
    reason: str = ""

    @property
    def is_low(self) -> bool:
        return self.elem in LOW_ELEMS


def elem_name(elem: int) -> str:
    return ELEM_NAMES[elem] if elem in ELEM_NAMES else str(TensorProto.DataType.Name(elem))


def float_names(node: onnx.NodeProto, info: GraphInfo) -> list[str]:
    return [n for n in [*node.input, *node.output] if n and info.is_float(n)]


def existing_elem(node: onnx.NodeProto, info: GraphInfo) -> int:
    types = [info.types[n] for n in float_names(node, info)]
    low = [t for t in types if t in LOW_ELEMS]
    if low:
        return low[0]
    return TensorProto.DOUBLE if types and all(t == TensorProto.DOUBLE for t in types) else TensorProto.FLOAT


def schema_problem(node: onnx.NodeProto, sig: Signature, info: GraphInfo, elem: int) -> str | None:
    """Why `node` cannot run with its float tensors in `elem` at this opset, or None if it can."""
    out_vars = {p for n, p in zip(node.output, sig.outputs) if n and info.is_float(n) and sig.is_var(p)}
    in_vars = {p for n, p in zip(node.input, sig.inputs) if n and info.is_float(n) and sig.is_var(p)}
    version = info.opsets.get(domain_of(node), 0)
    lacking = f"schema: {node.op_type} has no tensor({elem_name(elem)}) at opset {version}"
    if any(elem not in sig.allowed[v] for v in out_vars):
        return lacking
    if not any(elem in sig.allowed[v] for v in out_vars | in_vars):
        return lacking
    return None
