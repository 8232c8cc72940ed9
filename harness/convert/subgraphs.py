"""If/Loop/Scan bodies: find the outer tensors they capture, and rename those references.

Control-flow nodes keep their original types (their bodies are not converted). When a captured outer
tensor changes type in the converted parent graph, the converter inserts one Cast back to the
original type in the parent and points every reference inside the bodies (recursively) at it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import onnx


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def nested_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and, recursively, of its nodes' bodies."""
    for node in graph.node:
        yield node
        for body in subgraphs(node):
            yield from nested_nodes(body)


def captured(node: onnx.NodeProto) -> list[str]:
    """Outer-scope tensor names the node's bodies read (in first-use order, no duplicates)."""
    seen: dict[str, None] = {}
    for graph in subgraphs(node):
        for name in _captured_by_graph(graph):
            seen.setdefault(name, None)
    return list(seen)


def _captured_by_graph(graph: onnx.GraphProto) -> list[str]:
    local = {vi.name for vi in graph.input} | {init.name for init in graph.initializer}
    local |= {init.values.name for init in graph.sparse_initializer}
    result: list[str] = []
    for node in graph.node:
        for name in node.input:
            if name and name not in local:
                result.append(name)
        for inner in subgraphs(node):
            result.extend(n for n in _captured_by_graph(inner) if n not in local)
        local.update(node.output)
    return result


def rename_captures(node: onnx.NodeProto, mapping: Mapping[str, str]) -> None:
    """Point references to outer names in `mapping` at their new names, in every nested body."""
    for graph in subgraphs(node):
        _rename_in_graph(graph, mapping)


def _rename_in_graph(graph: onnx.GraphProto, mapping: Mapping[str, str]) -> None:
    local = {vi.name for vi in graph.input} | {init.name for init in graph.initializer}
    active = {k: v for k, v in mapping.items() if k not in local}
    for inner_node in graph.node:
        for index, name in enumerate(inner_node.input):
            if name in active:
                inner_node.input[index] = active[name]
        rename_captures(inner_node, active)
        for out in inner_node.output:
            active.pop(out, None)
    for out in graph.output:  # body outputs are positional: a captured tensor returned as-is is renamed too
        if out.name in active:
            out.name = active[out.name]
