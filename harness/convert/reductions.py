"""The reference run's reductions, inside the graph: a copy of the model that returns a few numbers per tensor.

Marking every intermediate tensor as a graph output makes onnxruntime keep them all alive and copy them out,
so a run costs the sum of all intermediates (attention scores included) instead of one forward pass. Here each
recorded tensor ``x`` gets instead, as extra nodes of the copy (at the model's own default-domain opset):

- float (float, float16, bfloat16, double; float16/bfloat16 first cast exactly to float): ``ReduceMax(x)``,
  ``ReduceMin(x)`` and ``ReduceSum(x)``. ``max(|max|, |min|)`` is the abs-max; the sum is NaN exactly when a
  NaN is present (ReduceMax may skip a NaN; a sum never does), and an infinity shows in the max or min. No
  ReduceMin for the outputs of ops that never go below zero (Softmax, Relu, Sigmoid...: NONNEGATIVE_OPS);
- integer and bool (read as they are where onnxruntime's kernels take them, else cast exactly: bool to uint8,
  int16/uint16/uint32 to int64): ``ReduceMax`` and ``ReduceMin`` (bool: ReduceMax only), as int64:
  abs-max ``max(|max|, |min|)``, as float64;
- strings: nothing but the shape (abs-max 0, as before);
- every one: ``Shape(x)`` (and ``Shape(Shape(x))``, its rank, where inference does not know it), which also
  tells an empty tensor;
- float tensors in `absmin_names` (the converter reads the smallest non-zero magnitude only for the
  denominators of Div and the bases of Pow): ``ReduceMin(Where(|x| > 0, |x|, inf))``.

The results of each kind are concatenated into one output, so a run returns a few small vectors. Each tensor's
reductions follow its producer in the node list, and the child runs the nodes in that order, so every tensor is
freed as in a plain forward. A tensor whose type onnx inference cannot tell (a custom op, a non-tensor value,
uint64, float8...) and a small one (the caller's choice) stay plain graph outputs, reduced in numpy by the child
exactly as before (:attr:`ReductionPlan.raw`). The child
(``refrun.py``) decodes the vectors with the plan; ``plan.to_request()`` is what it reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

# GraphBuilder and default_opset are imported from here by harness.diagnose.sidebyside
from harness.convert.graphbuilder import PREFIX, graph_names
from harness.convert.graphbuilder import GraphBuilder as GraphBuilder
from harness.convert.graphbuilder import default_opset as default_opset
from harness.convert.outputs import TensorFacts
from harness.core.dtypes import FLOAT_TYPES, INT_TYPES

MIN_OPSET = 7
_FLOATS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16})
REPORTED_ELEMS = frozenset(
    {
        TensorProto.FLOAT,
        TensorProto.UINT8,
        TensorProto.INT8,
        TensorProto.UINT16,
        TensorProto.INT16,
        TensorProto.INT32,
        TensorProto.INT64,
        TensorProto.BOOL,
        TensorProto.FLOAT16,
        TensorProto.DOUBLE,
        TensorProto.BFLOAT16,
    }
)
"""Element types the reference run reports in ``Magnitudes.dtypes`` (refrun's table of onnxruntime type names)."""


@dataclass(frozen=True)
class ReductionPlan:
    """Which recorded tensor went where: names in the order of their figures in each concatenated output."""

    floats: tuple[str, ...]
    """3 float32 figures each in ``<PREFIX>_f32``: max, min, sum."""
    doubles: tuple[str, ...]
    """The same, float64, in ``<PREFIX>_f64``."""
    ints: tuple[str, ...]
    """2 int64 figures each in ``<PREFIX>_i64``: max, min."""
    absmins: tuple[str, ...]
    """1 figure each (float32, or float64 for a double tensor: ``<PREFIX>_absmin64``) in ``<PREFIX>_absmin``."""
    absmin_doubles: tuple[str, ...]
    shapes: tuple[str, ...]
    """dims (after the rank, where `ranks` says -1), int64, in ``<PREFIX>_shapes``: every reduced tensor."""
    ranks: tuple[int, ...]
    """The rank of each of `shapes` where inference knows it, else -1 (read from the vector)."""
    raw: tuple[str, ...]
    """Tensors left as plain outputs, reduced in numpy (types unknown to onnx inference, or not plain tensors)."""
    kept: tuple[str, ...]
    """float16/bfloat16 tensors also kept as graph outputs, never fetched: onnxruntime's CPU provider runs fp16
    nodes it has no kernel for in float and drops the Cast pairs around them unless their output is a graph output,
    which changes the values (the copy path, where every tensor is an output, rounds each to fp16)."""
    dtypes: Mapping[str, int]
    """Element type of every reduced tensor that the reference run reports."""
    outputs: Mapping[str, str]
    """kind (f32, f64, i64, absmin, absmin64, shapes) -> output name."""

    def fetched(self) -> list[str]:
        """The outputs a run asks for: the concatenated reductions, then the raw tensors."""
        return [*self.outputs.values(), *self.raw]

    def to_request(self) -> dict[str, object]:
        return {
            "prefix": PREFIX + "/",
            "floats": list(self.floats),
            "doubles": list(self.doubles),
            "ints": list(self.ints),
            "absmins": list(self.absmins),
            "absmin_doubles": list(self.absmin_doubles),
            "shapes": list(self.shapes),
            "ranks": list(self.ranks),
            "dtypes": dict(self.dtypes),
            "outputs": dict(self.outputs),
        }


NONNEGATIVE_OPS = frozenset({"Relu", "Sigmoid", "Softmax", "Exp", "Sqrt", "Abs", "Softplus", "HardSigmoid"})
"""Ops whose outputs are never below zero (NaN aside, which the sum catches; Sqrt(-0.0) = -0.0 has |x| = 0)."""


def _native_reduce(elem: int, opset: int) -> int:
    """The type ReduceMax/ReduceMin read the tensor in: its own where onnxruntime's CPU kernels take it at this
    opset, else a wider one that holds it exactly (bool: uint8, 0 or 1)."""
    if elem in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64):
        return elem
    if elem in (TensorProto.INT8, TensorProto.UINT8) and opset >= 12:
        return elem
    if elem == TensorProto.BOOL:
        return TensorProto.UINT8 if opset >= 12 else TensorProto.INT32
    if elem in _FLOATS:
        return elem  # cast to float after the Identity that pins it
    return TensorProto.INT64


def denominators(model: onnx.ModelProto) -> set[str]:
    """Tensors whose smallest non-zero magnitude the converter reads: Div's divisor, Pow's base (top level)."""
    found: set[str] = set()
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        if node.op_type == "Div" and node.input[1]:
            found.add(node.input[1])
        elif node.op_type == "Pow" and node.input[0]:
            found.add(node.input[0])
    return found


def _around_low(graph: onnx.GraphProto, types: Mapping[str, int]) -> list[str]:
    """float16/bfloat16 node outputs, and the inputs and outputs of the nodes that read or write one."""
    low = {TensorProto.FLOAT16, TensorProto.BFLOAT16}
    produced = {name for node in graph.node for name in node.output if name}
    found: dict[str, None] = {}
    for node in graph.node:
        if node.name.startswith(PREFIX + "/"):
            continue
        names = [n for n in [*node.input, *node.output] if n]
        if any(types.get(n) in low for n in names):
            found.update((n, None) for n in names if n in produced)
    return list(found)


def _interleave(
    graph: onnx.GraphProto, constants: list[onnx.NodeProto], after: Mapping[str, list[onnx.NodeProto]]
) -> None:
    """Each tensor's reductions right after the node producing it, so that onnxruntime (which runs nodes in this
    order where the graph allows) frees the tensor as soon as its last consumer ran, as in the plain model,
    instead of keeping every tensor alive to the end of the run."""
    ordered = list(constants)
    produced = {name for node in graph.node for name in node.output}
    ordered += [n for name, nodes in after.items() if name not in produced for n in nodes]  # initializers...
    for node in graph.node:
        ordered.append(node)
        ordered += [n for name in node.output if name for n in after.get(name, ())]
    del graph.node[:]
    graph.node.extend(ordered)


def add_reductions(
    model: onnx.ModelProto,
    names: Iterable[str],
    *,
    facts: TensorFacts,
    absmin_names: Iterable[str],
    raw_names: Iterable[str] = (),
) -> ReductionPlan:
    """Replace `model`'s outputs (in place: pass the child's own copy) by the reductions of `names` (the tensors
    the reference run records) and the ones that stay raw: `raw_names` (small tensors: whole, they cost less than
    the nodes that reduce them) and those whose type onnx inference does not know (``facts.types``). Ranks
    inference does not know (``facts.ranks``) are read with Shape(Shape(x)). ValueError: the model's opset is too
    old."""
    types = facts.types
    opset = default_opset(model)
    if opset is None or opset < MIN_OPSET:
        raise ValueError(f"default-domain opset {opset} (in-graph reductions need {MIN_OPSET} or later)")
    graph = model.graph
    del graph.output[:]
    build = GraphBuilder(graph, opset, graph_names(graph))
    wanted_absmin, forced, ranks = set(absmin_names), set(raw_names), facts.ranks
    parts: dict[str, list[str]] = {k: [] for k in ("f32", "f64", "i64", "absmin", "absmin64", "shapes")}
    floats: list[str] = []
    doubles: list[str] = []
    ints: list[str] = []
    absmins: list[str] = []
    absmin_doubles: list[str] = []
    shapes: list[str] = []
    raw: list[str] = []
    pinned: list[str] = []
    rank_list: list[int] = []
    dtypes: dict[str, int] = {}
    after: dict[str, list[onnx.NodeProto]] = {}
    producers = {out: node.op_type for node in graph.node if node.domain in ("", "ai.onnx") for out in node.output}
    for name in names:
        build.current = after.setdefault(name, [])
        elem = types.get(name, 0)
        if (
            name in forced
            or elem not in FLOAT_TYPES | INT_TYPES | {TensorProto.STRING}
            or (name in wanted_absmin and elem not in INT_TYPES and opset < 9)
        ):  # Where: opset 9
            raw.append(name)
            continue
        shapes.append(name)
        if elem in REPORTED_ELEMS:
            dtypes[name] = elem
        shape = build.node("Shape", [name], "shape")
        rank_list.append(ranks.get(name, -1))
        parts["shapes"] += [shape] if name in ranks else [build.node("Shape", [shape], "rank"), shape]
        if elem == TensorProto.STRING:
            continue
        source, native = name, _native_reduce(elem, opset)
        if native != elem:
            source = build.node("Cast", [name], "cast", to=native)
        if elem in _FLOATS and elem != TensorProto.FLOAT:  # the Identity output stays a graph output: see kept
            pinned.append(build.node("Identity", [name], "pinned"))
            source = build.node("Cast", [pinned[-1]], "float", to=TensorProto.FLOAT)
        flat = build.node("Reshape", [source, build.const(np.array([-1], np.int64))], "flat")
        kind = "i64" if elem in INT_TYPES else "f64" if elem == TensorProto.DOUBLE else "f32"
        high = build.reduce("ReduceMax", flat, "reducemax")
        # max(|max|, |min|) is |max| where no value is below zero: the min slot repeats the max
        low = (
            high
            if elem == TensorProto.BOOL or (kind != "i64" and producers.get(name) in NONNEGATIVE_OPS)
            else build.reduce("ReduceMin", flat, "reducemin")
        )
        if kind == "i64":
            if native != TensorProto.INT64:
                high, low = (build.node("Cast", [v], "int64", to=TensorProto.INT64) for v in (high, low))
            parts[kind] += [high, low]
        else:
            parts[kind] += [high, low, build.reduce("ReduceSum", flat, "reducesum")]
        (ints if kind == "i64" else doubles if kind == "f64" else floats).append(name)
        if kind != "i64" and name in wanted_absmin:
            magnitude = build.node("Abs", [flat], "abs")
            dtype = np.float64 if kind == "f64" else np.float32
            low, high = build.const(np.array(0, dtype)), build.const(np.array(np.inf, dtype))
            positive = build.node("Greater", [magnitude, low], "positive")
            masked = build.node("Where", [positive, magnitude, high], "masked")
            parts["absmin64" if kind == "f64" else "absmin"].append(build.reduce("ReduceMin", masked, "absmin"))
            (absmin_doubles if kind == "f64" else absmins).append(name)
    outputs: dict[str, str] = {}
    _interleave(graph, build.constant_nodes, after)
    for kind, items in parts.items():
        if items:
            outputs[kind] = build.fresh(kind)
            graph.node.append(helper.make_node("Concat", items, [outputs[kind]], name=outputs[kind], axis=0))
            graph.output.append(onnx.ValueInfoProto(name=outputs[kind]))
    kept = [name for name in _around_low(graph, types) if name not in raw] + pinned
    graph.output.extend(onnx.ValueInfoProto(name=name) for name in [*raw, *kept])
    if not graph.output:
        raise ValueError("nothing to record")
    return ReductionPlan(
        floats=tuple(floats),
        doubles=tuple(doubles),
        ints=tuple(ints),
        absmins=tuple(absmins),
        absmin_doubles=tuple(absmin_doubles),
        shapes=tuple(shapes),
        ranks=tuple(rank_list),
        raw=tuple(raw),
        kept=tuple(kept),
        dtypes=dtypes,
        outputs=outputs,
    )
