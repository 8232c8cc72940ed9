"""The divergence profile: the error of every tensor, in graph order, against the FP32 run's own intermediates.

Every main-graph node output of the FP32 model that the converted model also has (the converter keeps the
original names; its Casts add new ones, which are ignored) is compared with its counterpart on the golden's
feeds: the FP32 model against the conversion as ``emulate`` rewrites it (the truthful low-precision oracle), on
the case's device (the CPU, or CUDA for a case on ``ort-cuda``: :attr:`ModelPair.providers`),
judged in the FP32 graph's topological order with the case's tolerance policy: each tensor's default tolerance
scales with its own FP32 magnitude. Integer and bool tensors (TopK's indices, masks) must match exactly: any
differing position is a divergence, counted (:attr:`TensorError.differing`).

The comparison runs inside onnxruntime (:mod:`harness.diagnose.sidebyside`): both models in one session, only
a few figures per tensor leave it, so the profile costs about two forwards of memory. Given the case's own outputs
(:attr:`ModelPair.obtained`), the graph outputs are judged from them against the goldens, as the case's verdict
judged them, once the session is gone; the side-by-side graph then leaves out what only they need (a decoder's LM
head and logits, the largest tensors of both halves). Where the two models
cannot share one graph, a warning says so and every tensor of both is marked as a graph output instead
(Polygraphy's ``mark all``: all intermediates of two forwards in memory; :func:`marked_profile`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from harness.core.dtypes import INT_TYPES
from harness.core.errors import RunnerError
from harness.core.memory import give_back_freed
from harness.core.npzfile import release_pages
from harness.core.providers import CUDA, on_host
from harness.data.feeds import cast_feeds, input_specs
from harness.data.marked import with_outputs
from harness.data.onnxfile import is_lazy
from harness.data.protocopy import light_copy
from harness.diagnose.facts import TensorError
from harness.diagnose.pair import ModelPair as ModelPair  # re-exported: callers build the pair from here
from harness.diagnose.sidebyside import Gate, read_figures, side_by_side
from harness.diagnose.sidemerge import LOW, materialise
from harness.diagnose.tensorjudge import Judged, judge_figures, judge_raw, judge_verdict
from harness.runners import make_runner
from harness.runners.ort import create_session, run_session
from harness.runners.ortsource import host_source, session_scratch

LOG = logging.getLogger("harness.diagnose")
_IN_GRAPH_MODES = frozenset({"elemwise", "max", "isclose"})


def computed_tensors(graph: onnx.GraphProto) -> set[str]:
    """Tensors whose value depends on a graph input (not on initializers, Constant nodes or shapes alone).
    A node with a subgraph counts as computed (its body may read any outer tensor)."""
    inits = {i.name for i in graph.initializer}
    live = {i.name for i in graph.input if i.name not in inits}
    for node in graph.node:
        has_body = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        if node.op_type not in ("Shape", "Size") and (has_body or any(i in live for i in node.input if i)):
            live.update(o for o in node.output if o)
    return live


@dataclass(frozen=True)
class Profile:
    """Per tensor in graph order: its error (:class:`TensorError`) and its largest finite |FP32| value."""

    rows: tuple[TensorError, ...]
    fp32_absmax: dict[str, float]
    outputs: tuple[str, ...]
    stats: dict[str, tuple[float, float]]
    """Per tensor: (max_abs, max_rel) as the tolerance check measured them."""

    def row(self, tensor: str) -> TensorError | None:
        return next((r for r in self.rows if r.tensor == tensor), None)


def divergence_profile(pair: ModelPair) -> Profile:
    """See the module docstring."""
    order = _order(pair.reference, pair.converted)
    types = tensor_types(pair.reference)
    computed = computed_tensors(pair.reference.graph)  # the others are small or folded: fetched whole
    gates = _gates(pair, [name for name, _ in order if name in computed], types)
    outputs = pair.case_outputs()
    try:
        measured, raw = _measure(pair, [name for name, _ in order if name not in outputs], types, gates)
        careful = {
            name: replace(gates[name], careful=True)
            for name, (_, counts) in measured.items()
            if types[name] not in INT_TYPES and bool((counts[:, 2] != counts[:, 3]).any())
        }
        if careful:  # FP32 tensors that are not all finite: judged with the NaN/inf rules in a second run
            measured.update(_measure(pair, list(careful), types, careful)[0])
    except (ValueError, RunnerError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        LOG.warning(
            "diagnosis: the FP32 model and the conversion cannot be compared in one graph (%s); every tensor of "
            "both is marked as a graph output instead, which holds all intermediates of two forwards in memory",
            err,
        )
        return marked_profile(pair)
    exact = frozenset(n for n in measured if types[n] in INT_TYPES)
    judged = _case_rows(pair, outputs)  # read once the side-by-side session is gone
    for name, _ in order:
        found: Judged | None = None
        if name in measured:
            found = judge_figures(pair, name, measured[name], exact=name in exact)
        elif raw and name in raw[0]:
            gold = [np.asarray(run[name]) for run in raw]
            found = judge_raw(pair, name, [np.asarray(run[LOW + name]) for run in raw], gold)
        if found is not None:  # else strings, and tensors neither compared nor fetched
            judged[name] = found
    return _assemble(pair.reference, order, _shapes_dropped(judged, computed))


def _case_rows(pair: ModelPair, names: frozenset[str]) -> dict[str, Judged]:
    """The graph outputs ``names``, judged from the case's own outputs against its goldens (:class:`ModelPair`):
    from the case's verdict where it holds the row, else read back and judged."""
    verdicts = {o.name: o for o in pair.verdict.outputs} if pair.verdict is not None else {}
    rows: dict[str, Judged] = {}
    for name in sorted(names):
        gold = [np.asarray(g[name]) for g in pair.goldens]
        found = judge_verdict(verdicts[name], gold) if name in verdicts else None
        if found is not None:
            rows[name] = found
    rest = sorted(names - rows.keys())
    if not rest or pair.obtained is None:
        return rows
    obtained = pair.obtained()
    for name in (n for n in rest if all(n in run for run in obtained)):
        got, gold = [np.asarray(run[name]) for run in obtained], [np.asarray(g[name]) for g in pair.goldens]
        if len(got) != len(gold) or any(a.shape != g.shape for a, g in zip(got, gold)):
            continue  # the case's verdict says what changed; no row compares unlike tensors
        found = judge_raw(pair, name, got, gold)
        if found is not None:
            rows[name] = found
    return rows


def _shapes_dropped(judged: dict[str, Judged], computed: set[str]) -> dict[str, Judged]:
    """Without the exact (integer) tensors that only shapes and constants make: shape arithmetic is never a cause
    (its error shows downstream)."""
    return {name: row for name, row in judged.items() if row[5] is None or name in computed}


Measured = dict[str, tuple[np.ndarray, np.ndarray]]
"""Per tensor compared in the graph: its figures and counts, one row per feed (see :mod:`sidebyside`)."""


def _measure(
    pair: ModelPair, names: Sequence[str], types: Mapping[str, int], gates: Mapping[str, Gate]
) -> tuple[Measured, list[dict[str, np.ndarray]]]:
    """One side-by-side session run on every feed: the figures of the gated tensors and the raw others."""
    host = on_host(pair.providers)
    values: dict[str, onnx.TensorProto] | None = {} if host else None  # on the host: the model holds no weights
    model, plan = side_by_side(pair, names, types=types, gates=gates, values=values)
    where = _weights_dir(model, model_dir=pair.model_dir, converted_dir=pair.converted_dir)
    with session_scratch() as tmp:
        source = host_source(model, Path(tmp), values=values) if host else model
        del model, values  # both halves' weights: on the host, written and let go before onnxruntime reads its copy
        give_back_freed()
        session = create_session(
            source,
            providers=pair.providers,
            runner="the diagnosis's comparison",
            model_dir=where,
            spinning=False,
            as_given=True,
            provider_options={CUDA: {"use_tf32": "0"}},  # the FP32 half's MatMuls in FP32, not TF32's 10-bit mantissa
        )
    del source  # a GPU session's model: onnxruntime holds its own, and the run needs the memory
    give_back_freed()
    if on_host(pair.providers):  # a run in host memory: the file-mapped goldens need not be resident
        release_pages(v for outputs in pair.goldens for v in outputs.values())
    runs = [run_session(session, dict(feed), runner="emulate") for feed in pair.feeds]
    del session
    give_back_freed()  # the session's arena and both halves' weights
    per_run = [read_figures(run, plan) for run in runs]
    measured = {
        name: (np.stack([r[name][0] for r in per_run]), np.stack([r[name][1] for r in per_run]))
        for name in plan.measured
    }
    raw = [{k: v for k, v in run.items() if k != plan.figures} for run in runs]
    return measured, raw


def _order(reference: onnx.ModelProto, converted: onnx.ModelProto) -> list[tuple[str, onnx.NodeProto]]:
    produced = {out for node in converted.graph.node for out in node.output}
    return [(out, node) for node in reference.graph.node for out in node.output if out and out in produced]


def tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every main-graph tensor onnx shape inference can tell."""
    try:
        inferred = onnx.shape_inference.infer_shapes(
            light_copy(model), check_type=False, strict_mode=False, data_prop=True
        )
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        inferred = model
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output, *graph.value_info]}
    types.update({i.name: i.data_type for i in graph.initializer})
    return {k: v for k, v in types.items() if v}


def _gates(pair: ModelPair, names: Sequence[str], types: Mapping[str, int]) -> dict[str, Gate]:
    """Tensors compared in the graph, with their tolerance's scale-free part: exact ones always, float ones
    whose tolerance is decided from maxima (the others stay raw: a statistic or top-k needs every element)."""
    gates: dict[str, Gate] = {}
    for name in names:
        if types.get(name) in INT_TYPES:
            gates[name] = Gate(rtol=0.0, nan_equal=True, inf_equal=True)
            continue
        tol = pair.tolerance(name, np.zeros(1, np.float32))
        if tol.mode in _IN_GRAPH_MODES and tol.top_k is None:
            gates[name] = Gate(
                rtol=tol.rtol, nan_equal=tol.nan_equal, inf_equal=tol.inf_equal, isclose=tol.mode == "isclose"
            )
    return gates


def _weights_dir(model: onnx.ModelProto, *, model_dir: Path | None, converted_dir: Path | None) -> Path | None:
    """The one folder the side-by-side model reads external weights from (the conversion's are loaded when its
    folder differs and the FP32 model has external weights too)."""
    low_dir = converted_dir or model_dir
    if not is_lazy(model):
        return model_dir
    if low_dir is not None and model_dir is not None and Path(low_dir).resolve() != Path(model_dir).resolve():
        materialise(model, LOW, Path(low_dir))
        return model_dir if is_lazy(model) else None
    return model_dir or low_dir


def _assemble(
    reference: onnx.ModelProto, order: Sequence[tuple[str, onnx.NodeProto]], judged: Mapping[str, Judged]
) -> Profile:
    """The profile of the ``judged`` tensors, in graph ``order``."""
    computed = computed_tensors(reference.graph)
    rows: list[TensorError] = []
    absmax: dict[str, float] = {}
    stats: dict[str, tuple[float, float]] = {}
    for name, node in order:
        if name not in judged:
            continue
        error, passed, max_abs, max_rel, scale, differing, elements = judged[name]
        stats[name] = (max_abs, max_rel)
        if differing is None:
            absmax[name] = scale
        rows.append(
            TensorError(
                tensor=name,
                node=node.name,
                op=node.op_type,
                error=error,
                passed=passed,
                computed=name in computed,
                differing=differing,
                elements=elements,
                port=output_port(node, name),
            )
        )
    return Profile(
        rows=tuple(rows), fp32_absmax=absmax, outputs=tuple(o.name for o in reference.graph.output), stats=stats
    )


def output_port(node: onnx.NodeProto, tensor: str) -> str:
    """The op schema's name for the output ``tensor`` of ``node`` (TopK: "Values", "Indices"), or ""."""
    try:
        schema = onnx.defs.get_schema(node.op_type, domain=node.domain)
    except onnx.defs.SchemaError:
        return ""
    index = list(node.output).index(tensor)
    outputs = schema.outputs
    return outputs[min(index, len(outputs) - 1)].name if outputs else ""


def marked_profile(pair: ModelPair) -> Profile:
    """The profile of the float tensors from every tensor of both models marked as a graph output (the way before
    the in-graph comparison, kept where the two cannot share a graph, and as the reference its tests compare
    with)."""
    order = _order(pair.reference, pair.converted)
    names = [out for out, _ in order]
    model_dir = pair.model_dir
    expected = make_runner("ort", with_outputs(pair.reference, names), model_dir=model_dir).run(pair.feeds).outputs
    mixed = with_outputs(pair.converted, names)
    obtained = (
        make_runner("emulate", mixed, model_dir=pair.converted_dir or model_dir)
        .run(cast_feeds(pair.feeds, input_specs(mixed)))
        .outputs
    )
    judged: dict[str, Judged] = {}
    for name in names:
        gold = [np.asarray(it[name]) for it in expected]
        if all(np.issubdtype(g.dtype, np.floating) for g in gold):
            found = judge_raw(pair, name, [np.asarray(it[name]) for it in obtained], gold)
            judged.update({name: found} if found is not None else {})
    return _assemble(pair.reference, order, judged)
