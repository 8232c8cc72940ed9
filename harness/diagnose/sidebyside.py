"""The divergence profile's figures, computed inside onnxruntime: the FP32 model and the emulated conversion in
one graph, each tensor compared with its counterpart by nodes placed right after the two producers.

Marking every tensor of both models as a graph output (as the profile did before) keeps every intermediate of
two forwards alive and copies it out: 27 GB on a 110 M decoder at 8x512. Here one session holds both models
(the conversion rewritten by :func:`harness.runners.emulate.emulation_model`, so it rounds exactly like the
``emulate`` runner; its names prefixed with :data:`LOW`), and each compared tensor ``b`` (FP32) and ``a`` (its
emulated counterpart), cast exactly to float64 and flattened, gets a few reductions, built with the in-graph
reductions' :class:`harness.convert.reductions.GraphBuilder` and, like them, placed right after the producers so
that onnxruntime frees each tensor after its last reader: the run costs about two forwards of memory. Per tensor
and feed it returns, in float64, ``[max finite |b|, max |a-b| where both are finite, max rel there, max |a-b|
where rel > rtol, max (|a-b| - rtol*|b|) (isclose only)]`` and ``[positions that match (both finite,
or a NaN or infinity the tolerance lets match; integer and bool tensors: equal), positions where both are
finite, positions where b is finite, size]``. These are exactly
what :func:`harness.judge.compare.compare_iterations` decides an ``elemwise``, ``max`` or ``isclose`` tolerance
from (an element is over when over atol AND rtol, so the tensor fails iff the max of |a-b| where rel > rtol
exceeds atol, which is known only after the FP32 magnitude is), and what ``scaled_error`` needs.

A tensor of more than :data:`SLICE` elements (:data:`DEVICE_SLICE` where the graph runs on a GPU) whose size is
known (``sizes``: the golden's run's shapes) is compared a slice of the flat tensor at a time, each slice's row freed before the next: the temporaries of a large logits
output never exceed a slice, whatever the vocabulary. Its rows combine exactly (maxima of the maxima, sums of the
sums and sizes: :func:`read_figures`).

Tensors judged by a statistic (``mean``/``median``/``quantile``) or with ``top_k``, and those whose type onnx
inference cannot tell, stay raw: both versions are graph outputs, judged in numpy as before.

A tensor that only moves or negates the values of another compared tensor, in both models (a Transpose, Reshape,
Squeeze, Unsqueeze, Flatten, Identity or Neg of the same input in the FP32 model and in the conversion, under the
same gate: a decoder's q/k/v reshapes and transposes), is not compared again: it shares that tensor's row
(:attr:`SidePlan.aliases`). Its elements are the same multiset (negated: the same magnitudes and errors), so every
maximum and count is the same; only the sums' rounding could differ, and they only tell whether a value is finite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from harness.convert.reductions import GraphBuilder, default_opset
from harness.core.dtypes import FLOAT_TYPES, INT_TYPES
from harness.core.providers import on_host
from harness.diagnose.pair import ModelPair
from harness.diagnose.sidemerge import LOW, merge_halves
from harness.diagnose.sideorder import compare_priorities, ordered, priorities, prune

FIGURES = 5
COUNTS = 4
_ZERO_EPS = 2.220446049250313e-16
SLICE = 1 << 22
"""Elements of a compared tensor whose temporaries are alive at once (16 MB a float32 temporary), in host memory."""
DEVICE_SLICE = 1 << 26
"""The same where the graph runs on a GPU (256 MB a temporary, three alive at most): a decoder's attention scores
and logits in one slice, not eight, so far fewer nodes (the 8x1024 decoder's graph took 3.5 s to load on CUDA,
about 0.2 ms a node)."""


@dataclass(frozen=True)
class Gate:
    """The scale-free part of a tensor's tolerance, known before the run."""

    rtol: float
    nan_equal: bool
    inf_equal: bool
    isclose: bool = False
    careful: bool = False
    """Judge with NaN/inf rules (Where per element): for a tensor whose FP32 values are not all finite."""


@dataclass(frozen=True)
class SidePlan:
    compared: tuple[str, ...]
    """Tensors reduced in the graph, in the order of their figures."""
    exact: frozenset[str]
    """Integer and bool tensors among them (compared for equality)."""
    fast: frozenset[str]
    """Float tensors with a fast row (see :func:`_fast_compare`)."""
    raw: tuple[str, ...]
    """Tensors returned whole (the FP32 one under its name, the emulated one under ``LOW + name``)."""
    figures: str
    """The output holding, per compared tensor, FIGURES figures then COUNTS counts (float64)."""
    rows: tuple[int, ...] = ()
    """Rows per compared tensor (more than one: compared a slice at a time); () : one each."""
    aliases: tuple[tuple[str, str], ...] = ()
    """(tensor, compared tensor whose row it shares): see the module docstring."""

    @property
    def measured(self) -> tuple[str, ...]:
        """Every tensor with figures: the compared ones, then their aliases."""
        return (*self.compared, *(name for name, _ in self.aliases))


SAME_VALUES = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Neg"})
"""Ops whose output holds exactly their first input's values (or their negations), rearranged."""


def _aliases(pair: ModelPair, tensors: Sequence[str], gates: Mapping[str, Gate]) -> dict[str, str]:
    """Per tensor of ``tensors`` that needs no comparison of its own, the earlier tensor whose row it shares."""
    made = {out: node for node in pair.reference.graph.node for out in node.output}
    made_low = {out: node for node in pair.converted.graph.node for out in node.output}
    wanted = set(tensors)
    found: dict[str, str] = {}
    for name in tensors:
        node, low = made.get(name), made_low.get(name)
        if node is None or low is None or node.op_type not in SAME_VALUES or not node.input:
            continue
        source = node.input[0]
        same_low = low.op_type == node.op_type and low.input[:1] == node.input[:1]  # no cast in between
        if same_low and source in wanted and name in gates and gates.get(source) == gates[name]:
            found[name] = found.get(source, source)
    return found


def _fast_compare(build: GraphBuilder, name: str, elem: int, gate: Gate) -> list[str]:
    """The comparison of a float tensor, in its own type (float16 and bfloat16 cast exactly to float), without
    Where: a few elementwise passes. Its row: ``[max |b|, max |d|, max rel, max gated, max excess, sum |d|, sum
    |b|, size, size]`` (``d = a - b``; rel = |d| / max(|b|, 2.2e-16)). The sums tell non-finite values
    (:func:`read_figures`): where ``b`` is not all finite the figures cannot judge the tensor, and the careful
    comparison (:func:`_compare`) runs for it in a second run."""
    flat_shape = build.const(np.array([-1], np.int64))
    b, a = (build.node("Reshape", [x, flat_shape], "flat") for x in (name, LOW + name))
    return _fast_rows(build, b, a, elem, gate)


def _slices(pair: ModelPair, size: int) -> range:
    """Where the slices of a flat tensor of ``size`` elements start (:data:`SLICE` apart in host memory,
    :data:`DEVICE_SLICE` on a GPU); empty when it is compared whole."""
    part = SLICE if on_host(pair.providers) else DEVICE_SLICE
    return range(0, size, part) if size > part else range(0)


def _sliced_compare(build: GraphBuilder, name: str, elem: int, gate: Gate, *, starts: range) -> list[str]:
    """:func:`_fast_compare` of a tensor a slice of the flat tensors at a time (``starts``: where each begins): one
    row per slice, its nodes created (and so run) before the next slice is cut."""
    flat_shape = build.const(np.array([-1], np.int64))
    b, a = (build.node("Reshape", [x, flat_shape], "flat") for x in (name, LOW + name))
    rows: list[str] = []
    for start in starts:
        bounds = [build.const(np.array([start], np.int64)), build.const(np.array([start + starts.step], np.int64))]
        part_b, part_a = (build.node("Slice", [x, *bounds], "part") for x in (b, a))
        rows += _fast_rows(build, part_b, part_a, elem, gate)
    return rows


def _fast_rows(build: GraphBuilder, b_flat: str, a_flat: str, elem: int, gate: Gate) -> list[str]:
    """The fast row of flat ``b`` (FP32) and ``a`` (emulated) in their own type ``elem`` (see :func:`_fast_compare`)."""
    low = elem in (TensorProto.FLOAT16, TensorProto.BFLOAT16)
    elem = TensorProto.DOUBLE if elem == TensorProto.DOUBLE else TensorProto.FLOAT
    dtype = np.float64 if elem == TensorProto.DOUBLE else np.float32

    def cast(tensor: str, to: int) -> str:
        return build.node("Cast", [tensor], "cast", to=to)

    flat_shape = build.const(np.array([-1], np.int64))
    b, a = (cast(x, elem) if low else x for x in (b_flat, a_flat))
    # nodes in the order that frees each full-size temporary soonest (onnxruntime runs them in this order): at
    # most three of them alive at once (|d|, the denominator or the mask, rel or the gated values)
    ad = build.node("Abs", [build.node("Sub", [a, b], "sub")], "diff")
    max_d, sum_d = build.reduce("ReduceMax", ad, "max"), build.reduce("ReduceSum", ad, "sum")
    ab = build.node("Abs", [b], "absb")
    max_b, sum_b = build.reduce("ReduceMax", ab, "max"), build.reduce("ReduceSum", ab, "sum")
    rtol = build.const(np.array(gate.rtol, dtype))
    excess = ""
    if gate.isclose:
        excess = build.reduce("ReduceMax", build.node("Sub", [ad, build.node("Mul", [ab, rtol], "rtolb")], "x"), "max")
    rel = build.node("Div", [ad, build.node("Max", [ab, build.const(np.array(_ZERO_EPS, dtype))], "denom")], "rel")
    max_rel = build.reduce("ReduceMax", rel, "max")
    gated = build.node("Mul", [ad, cast(build.node("Greater", [rel, rtol], "overrel"), elem)], "gated")
    max_gated = build.reduce("ReduceMax", gated, "max")
    figures = [max_b, max_d, max_rel, max_gated, excess or max_gated, sum_d, sum_b]
    size = cast(build.node("Reshape", [build.node("Size", [b], "size"), flat_shape], "size1"), TensorProto.DOUBLE)
    values = cast(build.node("Concat", figures, "figures", axis=0), TensorProto.DOUBLE)
    return [build.node("Concat", [values, size, size], "row", axis=0)]


def _compare(build: GraphBuilder, name: str, elem: int, gate: Gate) -> tuple[list[str], list[str]]:
    """The careful comparison (integer and bool tensors, and float ones whose FP32 values are not all finite),
    in float64 with compare's NaN/inf rules, element by element. The nodes comparing ``name`` (b) with ``LOW + name`` (a): (figures, counts), float64 of shape [1] each.
    Finite tests are ``x - x == 0`` (NaN for inf and NaN); ``d = a - b`` is finite exactly where both are."""
    flat_shape = build.const(np.array([-1], np.int64))
    zero, eps = build.const(np.array(0.0)), build.const(np.array(_ZERO_EPS))

    def wide(tensor: str) -> str:
        if elem in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
            tensor = build.node("Cast", [tensor], "float", to=TensorProto.FLOAT)
        return build.node(
            "Reshape", [build.node("Cast", [tensor], "double", to=TensorProto.DOUBLE), flat_shape], "flat"
        )

    def finite(x: str) -> str:
        return build.node("Equal", [build.node("Sub", [x, x], "self"), zero], "finite")

    def count(mask: str) -> str:  # in float64: exact up to 2**53 elements
        return build.reduce("ReduceSum", build.node("Cast", [mask], "count", to=TensorProto.DOUBLE), "count")

    b, a = wide(name), wide(LOW + name)
    d = build.node("Sub", [a, b], "sub")
    both, fb = finite(d), finite(b)
    abs_b = build.node("Abs", [b], "absb")
    gold = build.node("Where", [fb, abs_b, zero], "gold")
    err = build.node("Where", [both, build.node("Abs", [d], "diff"), zero], "err")
    denom = build.node("Where", [build.node("Greater", [abs_b, zero], "nonzero"), abs_b, eps], "denom")
    rel = build.node("Where", [both, build.node("Div", [err, denom], "div"), zero], "rel")
    rtol = build.const(np.array(gate.rtol))
    gated = build.node("Where", [build.node("Greater", [rel, rtol], "overrel"), err, zero], "gated")
    excess = build.node("Sub", [err, build.node("Mul", [gold, rtol], "rtolb")], "excess") if gate.isclose else gated
    figures = [build.reduce("ReduceMax", x, "max") for x in (gold, err, rel, gated)]
    figures.append(build.reduce("ReduceMax", excess, "max") if gate.isclose else figures[-1])
    if elem in INT_TYPES:
        ints = [
            build.node("Reshape", [build.node("Cast", [x], "i64", to=TensorProto.INT64), flat_shape], "flati")
            for x in (LOW + name, name)
        ]
        matched = build.node("Equal", ints, "equal")
    else:
        matched = both
        if gate.inf_equal:  # equal where not both finite: the same infinity
            matched = build.node("Or", [matched, build.node("Equal", [a, b], "same")], "ok")
        if gate.nan_equal:
            nans = build.node("And", [build.node("IsNaN", [a], "nana"), build.node("IsNaN", [b], "nanb")], "nn")
            matched = build.node("Or", [matched, nans], "ok")
    size = build.node("Reshape", [build.node("Size", [b], "size"), flat_shape], "size1")
    size = build.node("Cast", [size], "size", to=TensorProto.DOUBLE)
    return figures, [count(matched), count(both), count(fb), size]


def _builder(model: onnx.ModelProto) -> GraphBuilder:
    """A builder of new nodes in ``model``'s graph whose fresh names clash with none of the graph's."""
    graph = model.graph
    taken = {n for node in graph.node for n in [*node.input, *node.output, node.name]}
    taken |= {v.name for v in [*graph.input, *graph.initializer]}
    return GraphBuilder(graph, default_opset(model) or 0, taken)


def side_by_side(
    pair: ModelPair,
    tensors: Sequence[str],
    *,
    types: Mapping[str, int],
    gates: Mapping[str, Gate],
    values: dict[str, onnx.TensorProto] | None = None,
) -> tuple[onnx.ModelProto, SidePlan]:
    """The model (module docstring) comparing ``tensors`` of the pair's FP32 model with the conversion's, in FP32 graph
    order; ``gates``: the tensors compared in the graph and their gates (others with a known type stay raw); larger
    ``sizes`` a slice at a time; ``values``: :func:`merge_halves`. ValueError: the two cannot share a graph."""
    model, ref_nodes = merge_halves(pair.reference, pair.converted, values=values)
    graph = model.graph
    build = _builder(model)
    figures: list[str] = []
    compared: list[str] = []
    rows: list[int] = []
    after: dict[str, list[onnx.NodeProto]] = {}
    in_graph = [n for n in tensors if n in gates and types.get(n) in FLOAT_TYPES | INT_TYPES]
    aliases = {name: source for name, source in _aliases(pair, in_graph, gates).items() if types[name] == types[source]}
    for name in tensors:
        if name in aliases:
            continue
        if name in gates and types.get(name) in FLOAT_TYPES | INT_TYPES:
            build.current = after.setdefault(name, [])
            if gates[name].careful or types[name] in INT_TYPES:
                f, c = _compare(build, name, types[name], gates[name])
                figures += [*f, *c]  # one vector in tensor order: each chain finishes before the next starts
                rows.append(1)
            else:
                starts = _slices(pair, pair.sizes.get(name, 0))
                made = _sliced_compare(build, name, types[name], gates[name], starts=starts) if starts else []
                figures += made or _fast_compare(build, name, types[name], gates[name])
                rows.append(len(made) or 1)
            compared.append(name)
    raw = [n for n in tensors if n not in compared and n not in aliases]
    first = {out: i for i, node in enumerate(graph.node) if i < ref_nodes for out in node.output}
    priority = priorities(graph, ref_nodes, first, prefix=LOW)
    base = len(graph.node)
    graph.node.extend([*build.constant_nodes, *(n for name in compared for n in after[name])])
    compare_priorities(graph, base, priority)
    in_order = ordered(graph, priority)
    del graph.node[:]
    graph.node.extend(in_order)
    del graph.output[:]
    vector = build.fresh("figures")
    graph.node.append(helper.make_node("Concat", figures or [build.const(np.zeros(0))], [vector], axis=0))
    graph.output.append(onnx.ValueInfoProto(name=vector))
    graph.output.extend(onnx.ValueInfoProto(name=n) for name in raw for n in (name, LOW + name))
    prune(graph)
    plan = SidePlan(
        compared=tuple(compared),
        exact=frozenset(n for n in compared if types[n] in INT_TYPES),
        fast=frozenset(n for n in compared if types[n] not in INT_TYPES and not gates[n].careful),
        raw=tuple(raw),
        figures=vector,
        rows=tuple(rows) if any(r > 1 for r in rows) else (),
        aliases=tuple(aliases.items()),
    )
    return model, plan


def read_figures(outputs: Mapping[str, np.ndarray], plan: SidePlan) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per compared tensor: (its FIGURES figures, its COUNTS counts as int64) of one run, fast rows decoded:
    ``sum |d|`` NaN, or inf with ``max |d|`` inf, is a non-finite emulated value where FP32 is finite (count
    1, as compare only asks whether there is one); ``sum |b|`` not finite (or ``sum |d|`` inf from large finite
    values alone) marks FP32 as not all finite, which sends the tensor to the careful comparison."""
    v = np.asarray(outputs[plan.figures], dtype=np.float64).reshape(-1, FIGURES + COUNTS)
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    starts = np.cumsum([0, *(plan.rows or [1] * len(plan.compared))])
    for i, name in enumerate(plan.compared):
        row = _combined(v[starts[i] : starts[i + 1]])
        if name not in plan.fast:
            found[name] = (row[:FIGURES], row[FIGURES:].astype(np.int64))
            continue
        size = int(row[7])
        sum_d, sum_b, max_d = row[5], row[6], row[1]
        bad_d = bool(np.isnan(sum_d) or np.isinf(max_d))
        unsure = not np.isfinite(sum_b) or (np.isinf(sum_d) and not bad_d)
        both = size - int(bad_d)
        found[name] = (row[:FIGURES], np.array([both, both, size - int(unsure), size], np.int64))
    for name, source in plan.aliases:
        found[name] = found[source]
    return found


def _combined(rows: np.ndarray) -> np.ndarray:
    """One tensor's row from the rows of its slices: the maxima of the figures' maxima (a NaN kept), the sums of
    the sums, counts and sizes (both row layouts keep their maxima first: FIGURES of them)."""
    if len(rows) == 1:
        single: np.ndarray = rows[0]
        return single
    combined: np.ndarray = np.concatenate([np.max(rows[:, :FIGURES], axis=0), np.sum(rows[:, FIGURES:], axis=0)])
    return combined
