"""The cheap step: classification + conversion from precomputed magnitudes. No onnxruntime run here.

``convert`` never mutates its input and is deterministic (same input -> byte-identical output).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import onnx
from onnx import TensorProto

from harness.convert.casts import Rewriter
from harness.convert.classify import Classifier
from harness.convert.decision import Decision, existing_elem
from harness.convert.flops import flop_share, node_flops
from harness.convert.flopshapes import flop_scope, flop_shapes
from harness.convert.folding import (
    USER_CAST,
    follow_data,
    identity_casts,
    merge_small_islands,
    selections_follow_readers,
)
from harness.convert.graphinfo import GraphInfo, SigCache, build_info
from harness.convert.magnitudes import Magnitudes
from harness.convert.opset import prepare, warn_requested_opset
from harness.convert.options import ConvertOptions
from harness.convert.ortcpu import note_cpu_bf16
from harness.convert.predicates import drop_predicate_casts
from harness.convert.refusals import check_io_range, check_known_ops
from harness.convert.result import ConversionResult
from harness.convert.summary import log_summary
from harness.convert.validate import expected_io_type, io_types, strict_error, validate
from harness.convert.valueinfo import complete_value_info
from harness.core.dtypes import LOW_ELEMS
from harness.core.errors import ConversionError
from harness.data.onnxfile import is_lazy
from harness.data.protocopy import compacted

LOG = logging.getLogger("harness.convert")


MAX_REJECTED = 16
"""How many nodes onnx's strict inference may reject in the low type before the conversion gives up."""


class _Rejected(Exception):
    def __init__(self, node: str, reason: str, error: ConversionError) -> None:
        super().__init__(reason)
        self.node, self.reason, self.error = node, reason, error


def convert(
    model: onnx.ModelProto,
    *,
    options: ConvertOptions,
    magnitudes: Magnitudes | None,
    base_dir: Path | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> ConversionResult:
    """Classify every node from `magnitudes` (None = no data rule) and build the mixed-precision model.

    A lazily loaded model (``load_model(path, weights="lazy")``, `base_dir` = its folder) is converted without
    loading its weights: they are read one at a time for their figures, and converted when the result is saved.
    A node that onnx's strict type inference rejects in the low type although its schema allows it (a function
    body typed for fp32 only, such as MeanVarianceNormalization's) is kept FP32 with that reason, and the model
    is built again; a failure on a node already FP32 is a ConversionError.

    `shapes`: concrete tensor shapes for the FLOP share where `magnitudes` (which carry the reference run's) are
    None: the case's input shapes, or a run's shapes of any tensors (:mod:`harness.convert.flopshapes`)."""
    rejected: dict[str, str] = {}
    observed = shapes if magnitudes is None else magnitudes.shapes
    while True:
        try:
            return _convert_once(model, options, magnitudes, rejected, (base_dir, observed))
        except _Rejected as err:
            if len(rejected) >= MAX_REJECTED:
                raise err.error from None
            LOG.info("node %s: %s; kept FP32 and converting again", err.node, err.reason)
            rejected[err.node] = err.reason


def _convert_once(
    model: onnx.ModelProto,
    options: ConvertOptions,
    magnitudes: Magnitudes | None,
    rejected: dict[str, str],
    where: tuple[Path | None, Mapping[str, Sequence[int]] | None],
) -> ConversionResult:
    base_dir, observed = where
    original_inputs, original_outputs = io_types(model)
    work = onnx.ModelProto()
    work.CopyFrom(model)
    check_known_ops(work, options)
    check_io_range(work, options, magnitudes)
    if not rejected:
        warn_requested_opset(work, opset=options.opset, low_precision_type=options.low_precision_type)
    work = prepare(
        work,
        target=options.target_opset,
        low_precision_type=options.low_precision_type,
        custom_ops=set(options.custom_op_precisions()),
    )
    info = build_info(work, observed_types=magnitudes.dtypes if magnitudes is not None else None, base_dir=base_dir)
    if drop_predicate_casts(work, info.types):  # IsInf(Cast(x, DOUBLE)) is IsInf(x): the Cast asks nothing
        info = build_info(work, observed_types=magnitudes.dtypes if magnitudes is not None else None, base_dir=base_dir)
    sig_cache: SigCache = {}
    classifier = Classifier(work, info, options, magnitudes, sig_cache)
    decisions = classifier.run(warn=not rejected)
    nodes = list(work.graph.node)
    known = flop_shapes(work, shapes=observed)
    shape_of = known.lookup
    _keep_rejected(nodes, info, decisions, rejected)
    _fold(nodes, info, decisions, options, lambda n: node_flops(n, shape_of, info.initializers))
    _keep_rejected(nodes, info, decisions, rejected)  # folding never sends a node onnx rejected back to low
    flops = flop_share(
        nodes,
        lambda n: decisions[n.name].is_low,
        shape_of,
        dict(info.initializers),
        scope=flop_scope(info, known),
    )
    held = flop_share(nodes, lambda n: decisions[n.name].reason.startswith(USER_CAST), shape_of, info.initializers)
    exact_ints = (
        frozenset()
        if magnitudes is None
        else frozenset(name for name, value in magnitudes.absmax.items() if value <= 2.0**24)
    )
    state = Rewriter(work, info, decisions, options, sig_cache, exact_ints).run()
    try:
        inferred = validate(
            work,
            original_inputs=original_inputs,
            original_outputs=original_outputs,
            options=options,
            input_error=lambda: _input_error(model, options),
        )
    except ConversionError as err:
        if err.node in decisions and decisions[err.node].is_low and err.node not in rejected:
            op = next(n.op_type for n in nodes if n.name == err.node)
            detail = err.problem.partition(": ")[2].strip().splitlines()[0][:160]
            raise _Rejected(
                err.node, f"inference: onnx rejects {op} in {options.low_precision_type} ({detail})", err
            ) from None
        raise
    complete_value_info(work, inferred, storage=state.storage, shapes=info.shapes)
    if options.low_elem == TensorProto.BFLOAT16:
        note_cpu_bf16(work)
    low_nodes = tuple(n.name for n in nodes if decisions[n.name].is_low)
    high_nodes = tuple((n.name, decisions[n.name].reason or "fp32") for n in nodes if not decisions[n.name].is_low)
    inserted = sum(1 for n in work.graph.node if n.name in state.ours)  # ours still in the graph: the one count
    log_summary(options, decisions, nodes, flops, inserted)  # that the CLI, the report and the nightly rule all show
    return ConversionResult(
        model=compacted(work),  # the copy's FP32 bytes, replaced, would live as long as the result
        low_nodes=low_nodes,
        high_nodes=high_nodes,
        lowp_flop_share=flops.share,
        cast_count=inserted,
        clamped=tuple(state.clamped),
        base_dir=base_dir if is_lazy(work) else None,
        lowp_share_bound=flops.bound,
        cast_held_share=held.share,
    )


def _input_error(model: onnx.ModelProto, options: ConvertOptions) -> str | None:
    """The strict check's message on the input as the converter prepares it (same node names, same opset)."""
    work = onnx.ModelProto()
    work.CopyFrom(model)
    return strict_error(
        prepare(
            work,
            target=options.target_opset,
            low_precision_type=options.low_precision_type,
            custom_ops=set(options.custom_op_precisions()),
        )
    )


def _fold(
    nodes: list[onnx.NodeProto],
    info: GraphInfo,
    decisions: dict[str, Decision],
    options: ConvertOptions,
    flops_of: Callable[[onnx.NodeProto], int | None],
) -> None:
    """Rules 8-10 (:mod:`harness.convert.folding`): moves follow their data, small FP32 islands merge, identity
    user Casts between low nodes become Identity nodes."""

    def storage_in(name: str) -> int | None:
        return expected_io_type(info.types[name], keep_io_types=options.keeps_io_types, low=options.low_elem)

    follow_data(nodes, info, decisions, storage_in)
    selections_follow_readers(nodes, info, decisions)
    merge_small_islands(nodes, info, decisions, options=options, flops_of=flops_of)
    identities = identity_casts(nodes, info, decisions, low=options.low_elem)
    for node in nodes:
        if node.name in identities:
            node.op_type = "Identity"
            del node.attribute[:]


def _keep_rejected(
    nodes: list[onnx.NodeProto], info: GraphInfo, decisions: dict[str, Decision], rejected: dict[str, str]
) -> None:
    """Nodes onnx's strict inference rejected in the low type stay in their own high type, with the reason."""
    for node in nodes:
        if node.name in rejected and decisions[node.name].is_low:
            high = existing_elem(node, info)
            decisions[node.name] = Decision(high if high not in LOW_ELEMS else TensorProto.FLOAT, rejected[node.name])
