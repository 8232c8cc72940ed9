"""Nodes added to a copy of a graph: fresh names under one prefix and Constants made once (the reference run's
in-graph reductions, :mod:`harness.convert.reductions`, and the diagnosis's side-by-side comparison build with
it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from harness.convert.subgraphs import subgraphs

PREFIX = "castguard_mag"
"""The prefix of every name the builder makes (the reference run tells its own outputs by it)."""


def default_opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def graph_names(graph: onnx.GraphProto) -> set[str]:
    """Every node and tensor name in `graph` and its nested bodies (new names must not collide with any)."""
    names = {v.name for v in [*graph.input, *graph.output, *graph.initializer, *graph.value_info]}
    for node in graph.node:
        names.update([node.name, *node.input, *node.output])
        for body in subgraphs(node):
            names |= graph_names(body)
    return names


class GraphBuilder:
    """Fresh-named nodes and shared Constants added to a graph copy (the in-graph reductions and the diagnosis's
    side-by-side comparison, :mod:`harness.diagnose.sidebyside`, build with it)."""

    def __init__(self, graph: onnx.GraphProto, opset: int, taken: set[str]) -> None:
        self.graph, self.opset, self.taken, self.count = graph, opset, taken, 0
        self.constants: dict[tuple[str, bytes, tuple[int, ...]], str] = {}
        self.constant_nodes: list[onnx.NodeProto] = []
        self.current: list[onnx.NodeProto] = []
        """The nodes reducing the tensor at hand; placed right after its producer (see
        :func:`harness.convert.reductions.add_reductions`)."""

    def fresh(self, hint: str) -> str:
        while True:
            self.count += 1
            name = f"{PREFIX}/{self.count}_{hint}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def node(self, op: str, inputs: list[str], hint: str, **attrs: Any) -> str:
        out = self.fresh(hint)
        self.current.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def const(self, value: np.ndarray) -> str:
        """A Constant node (not an initializer: IR < 4 wants every initializer among the inputs), made once."""
        key = (value.dtype.str, value.tobytes(), value.shape)
        if key not in self.constants:
            out = self.fresh("const")
            self.constant_nodes.append(
                helper.make_node("Constant", [], [out], name=out, value=numpy_helper.from_array(value, out))
            )
            self.constants[key] = out
        return self.constants[key]

    def reduce(self, op: str, flat: str, hint: str) -> str:
        """`op` over all of a 1-D tensor, keepdims: shape [1] (axes omitted: every axis, at any opset)."""
        return self.node(op, [flat], hint, keepdims=1)
