"""The cause of a failing case: the first divergence whose error reaches a failing output.

A tensor beyond tolerance is not a cause when the ops after it absorb its error: a -FLT_MAX attention-mask
fill clamped to the low type's largest value is beyond tolerance, and so is the masked score it is added to,
but Softmax gives the same probabilities; a saturated Softmax or Sigmoid input, a ReLU of a large negative
error, likewise. So the cause is the earliest tensor, in graph order, such that

* it is computed (it depends on a graph input: constants, initializer expressions and shape arithmetic are
  never a cause on their own: their error shows in the first computed tensor that reads them), and
* a path of tensors that are all beyond tolerance leads from it to a graph output that fails.

On that path every tensor carries the error, so keeping the path's first node FP32 removes the error where it
is born; a tensor off every such path has its error absorbed before the outputs, and changing it cannot change
the verdict. Tensors the converted model does not have (renamed by the converter) are passed through.

The fix region starts at the cause's node and adds, transitively, every node that reads a region tensor whose
FP32 values exceed the low type's range: running such a reader in low precision would cast that value to
inf (the x**2 -> ReduceMean -> Add -> Sqrt chain of an RMSNorm at ``data_max`` inf is one region).

A value out of range is rarely alone: a massive activation in the residual stream overflows every RMSNorm's x**2
after it, and keeping the first one FP32 leaves the others. :func:`range_region` is every such region at once:
the one of each computed node whose FP32 output exceeds the low type's range (the fix tried after the cause's).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import onnx

from harness.core.dtypes import LOW_MAX, PRECISION_ELEMS
from harness.diagnose.profile import Profile


def _body_reads(node: onnx.NodeProto) -> list[str]:
    """Names the subgraphs of ``node`` (If branches, Loop/Scan bodies, nested) read, outer-scope ones included."""
    names: list[str] = []
    for attr in node.attribute:
        for body in (
            [attr.g]
            if attr.type == onnx.AttributeProto.GRAPH
            else list(attr.graphs)
            if attr.type == onnx.AttributeProto.GRAPHS
            else []
        ):
            for inner in body.node:
                names += [i for i in inner.input if i] + _body_reads(inner)
    return names


def consumers_of(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """Per tensor, the main-graph nodes that read it: as an input, or from inside one of their subgraphs."""
    readers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in dict.fromkeys([*(i for i in node.input if i), *_body_reads(node)]):
            readers[name].append(node)
    return readers


def carriers(graph: onnx.GraphProto, profile: Profile) -> set[str]:
    """Tensors from which a path of tensors beyond tolerance reaches a failing graph output."""
    failing = {r.tensor for r in profile.rows if not r.passed}
    known = {r.tensor for r in profile.rows}
    outputs = set(profile.outputs)
    readers = consumers_of(graph)
    reach: set[str] = set()
    for node in reversed(graph.node):
        for name in node.output:
            if not name or (name in known and name not in failing):
                continue
            if (name in outputs and name in failing) or any(
                out in reach for reader in readers.get(name, ()) for out in reader.output
            ):
                reach.add(name)
    return reach & failing


def find_cause(graph: onnx.GraphProto, profile: Profile) -> int | None:
    """Index into ``profile.rows`` of the cause (see the module docstring), or None."""
    reach = carriers(graph, profile)
    return next((i for i, r in enumerate(profile.rows) if r.computed and r.tensor in reach), None)


def fix_region(graph: onnx.GraphProto, profile: Profile, cause_node: str, *, precision: str) -> list[str]:
    """Names of the nodes of the fix region (see the module docstring), in graph order."""
    limit = LOW_MAX[PRECISION_ELEMS[precision]]
    readers = consumers_of(graph)
    by_name = {n.name: n for n in graph.node if n.name}
    if cause_node not in by_name:
        return []
    region, todo = {cause_node}, [by_name[cause_node]]
    while todo:
        node = todo.pop()
        for out in node.output:
            if profile.fp32_absmax.get(out, 0.0) <= limit:
                continue
            for reader in readers.get(out, ()):
                if reader.name and reader.name not in region:
                    region.add(reader.name)
                    todo.append(reader)
    return [n.name for n in graph.node if n.name in region]


def range_region(graph: onnx.GraphProto, profile: Profile, *, precision: str) -> list[str]:
    """Names of the nodes of every fix region that starts at a computed node whose FP32 output exceeds the low
    type's range (see the module docstring), in graph order; [] when none does."""
    limit = LOW_MAX[PRECISION_ELEMS[precision]]
    computed = {r.tensor for r in profile.rows if r.computed}
    starts = [
        n.name
        for n in graph.node
        if n.name and any(o in computed and profile.fp32_absmax.get(o, 0.0) > limit for o in n.output)
    ]
    region: set[str] = set()
    for name in starts:
        if name not in region:
            region.update(fix_region(graph, profile, name, precision=precision))
    return [n.name for n in graph.node if n.name in region]


def neighbourhood(graph: onnx.GraphProto, profile: Profile, cause_node: str, *, limit: int) -> list[str]:
    """More candidates for the fix search, most likely first: the producers of the cause node's computed
    inputs (rounding born before the cause shows there, as in a cancellation), then the nodes along the
    carrying paths after it, in graph order. Named nodes only; at most ``limit``."""
    producer = {out: n for n in graph.node for out in n.output if out}
    computed = {r.tensor for r in profile.rows if r.computed}
    node = next((n for n in graph.node if n.name == cause_node), None)
    if node is None:
        return []
    upstream = [producer[i].name for i in node.input if i in producer and i in computed and producer[i].name]
    reach = carriers(graph, profile)
    downstream = [n.name for n in graph.node if n.name and any(o in reach for o in n.output)]
    names: Sequence[str] = list(dict.fromkeys([*upstream, *downstream]))
    return [n for n in names if n != cause_node][:limit]
