"""The order the side-by-side graph runs in (:mod:`harness.diagnose.sidebyside`): each tensor's comparison right
after both of its producers, so that onnxruntime frees every tensor soon after its last reader and the profile costs
about two forwards of memory (onnxruntime runs a ``PRIORITY_BASED`` session's nodes in the order given where the
graph allows)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

import onnx


def ordered(graph: onnx.GraphProto, priority: Mapping[int, tuple[int, int]]) -> list[onnx.NodeProto]:
    """A topological order of ``graph.node`` that follows ``priority`` (node index -> key) where it can (Kahn's
    algorithm, smallest key first), so each tensor's comparison runs as soon as both producers did."""
    nodes = list(graph.node)
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    needs: list[set[int]] = []
    for node in nodes:
        reads = {i for i in node.input if i} | outer_reads(node)
        needs.append({producer[r] for r in reads if r in producer})
    readers: dict[int, list[int]] = {}
    for i, deps in enumerate(needs):
        for d in deps:
            readers.setdefault(d, []).append(i)
    waiting = [len(deps) for deps in needs]
    ready = [(priority[i], i) for i in range(len(nodes)) if not waiting[i]]
    heapq.heapify(ready)
    order: list[onnx.NodeProto] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(nodes[i])
        for r in readers.get(i, ()):
            waiting[r] -= 1
            if not waiting[r]:
                heapq.heappush(ready, (priority[r], r))
    if len(order) != len(nodes):
        raise ValueError("the side-by-side graph has a cycle")
    return order


def prune(graph: onnx.GraphProto) -> None:
    """Drop the nodes no graph output depends on, and the initializers only they read, in place (the others are not
    copied: a decoder's weights stay where they are), keeping the order: the side-by-side graph runs as given (no
    optimizer removes them), so a tensor left out of the comparison costs nothing when nothing compared needs it."""
    needed = {o.name for o in graph.output}
    dead: list[int] = []
    for index in range(len(graph.node) - 1, -1, -1):
        node = graph.node[index]
        if any(o in needed for o in node.output if o):
            needed |= {i for i in node.input if i} | outer_reads(node)
        else:
            dead.append(index)
    for index in dead:  # from the last: the earlier indices stay valid
        del graph.node[index]
    if dead:
        for index in [i for i, init in enumerate(graph.initializer) if init.name not in needed][::-1]:
            del graph.initializer[index]


def outer_reads(node: onnx.NodeProto) -> set[str]:
    found: set[str] = set()
    for attr in node.attribute:
        for body in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
            for inner in body.node:
                found |= {i for i in inner.input if i} | outer_reads(inner)
    return found


def priorities(
    graph: onnx.GraphProto, ref_nodes: int, first: Mapping[str, int], *, prefix: str
) -> dict[int, tuple[int, int]]:
    """FP32 node i: (i, 1); an emulated node: (the FP32 position of the tensor it makes, 0), or, for the nodes
    the conversion added (``prefix``: the emulated half's names), the position of the next emulated node that makes one (they run just before it)."""
    priority: dict[int, tuple[int, int]] = {i: (i, 1) for i in range(ref_nodes)}
    pending: list[int] = []
    for i in range(ref_nodes, len(graph.node)):
        outs = [o[len(prefix) :] for o in graph.node[i].output if o.startswith(prefix)]
        slot = next((first[o] for o in outs if o in first), None)
        pending.append(i)
        if slot is not None:
            priority.update((p, (slot, 0)) for p in pending)
            pending = []
    priority.update((p, (len(graph.node), 0)) for p in pending)
    return priority


def compare_priorities(graph: onnx.GraphProto, start: int, priority: dict[int, tuple[int, int]]) -> None:
    """A comparison node runs right after the later of its tensor's two producers: it inherits the largest
    priority among the nodes it reads (its own chain included)."""
    producer = {out: i for i, n in enumerate(graph.node) for out in n.output if out}
    for i in range(start, len(graph.node)):
        keys = [priority[producer[x]] for x in graph.node[i].input if x in producer]
        priority[i] = (max((k[0] for k in keys), default=-1), 2)
