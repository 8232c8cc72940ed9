"""The cheap step: classification + conversion from precomputed magnitudes. No onnxruntime run here.

``convert`` never mutates its input and is deterministic (same input -> byte-identical output).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import defs

from harness.convert.casts import Rewriter
from harness.convert.classify import Classifier, Decision
from harness.convert.flops import flop_share
from harness.convert.graphinfo import GraphInfo, SigCache, build_info, domain_of
from harness.dtypes import LOW_MAX
from harness.convert.magnitudes import Magnitudes
from harness.convert.opset import prepare
from harness.convert.options import ConvertOptions
from harness.convert.validate import expected_io_type, io_types, validate
from harness.data.onnxfile import is_lazy
from harness.errors import ConversionError

LOG = logging.getLogger("harness.convert")
RUNTIME_DOMAINS = ("com.microsoft",)
"""Non-ONNX domains onnxruntime implements: their ops are known, never rewritten, kept in their types."""


@dataclass(frozen=True)
class ConversionResult:
    model: onnx.ModelProto
    low_nodes: tuple[str, ...]
    high_nodes: tuple[tuple[str, str], ...]
    """(node, reason) for every node not in low precision, including the ones kept as they were."""
    lowp_flop_share: float
    cast_count: int
    """Casts inserted by the converter (the user's own Casts are not counted)."""
    clamped: tuple[str, ...]
    base_dir: Path | None = None
    """Folder that ``model``'s external tensors are read from (a lazily loaded model; None: all in memory).
    Such a model may hold pending casts: write it with :func:`harness.data.onnxfile.save_model`."""


def check_known_ops(model: onnx.ModelProto, options: ConvertOptions) -> None:
    """Every op must have an onnx schema, be an onnxruntime contrib op, or be declared in custom_ops."""
    custom = options.custom_op_precisions()
    opsets = {o.domain: o.version for o in model.opset_import}
    for node in model.graph.node:
        domain = domain_of(node)
        if node.op_type in custom or domain.startswith(RUNTIME_DOMAINS):
            continue
        version = opsets.get(domain, opsets.get("ai.onnx", 0) if domain == "" else 0)
        try:
            defs.get_schema(node.op_type, max(version, 1), domain)
            continue
        except defs.SchemaError:
            pass
        raise ConversionError(
            where="model", step="classify", node=node.name,
            problem=f"op {node.op_type!r} (domain {domain or 'ai.onnx'!r}, opset {version}) is not an ONNX op at "
                    "this opset and not declared as a custom op",
            fix=f"declare it: custom_ops=['{node.op_type}'] (CLI --custom_ops {node.op_type}[:fp16]), "
                "or fix the model's opset_import")


def check_io_range(model: onnx.ModelProto, options: ConvertOptions, magnitudes: Magnitudes | None) -> None:
    """A graph input/output that becomes fp16/bf16 (keep_io_types=False) must hold its reference values: one
    whose finite FP32 magnitude exceeds the low type's largest value would be inf (AutoCast converts it anyway;
    found by the converter fuzzing in tests/property)."""
    if magnitudes is None:
        return
    limit = LOW_MAX[options.low_elem]
    for role, types in zip(("input", "output"), io_types(model)):
        for name, elem in types.items():
            value = magnitudes.absmax.get(name, 0.0)
            low = expected_io_type(elem, keep_io_types=options.keeps_io_types, low=options.low_elem) != elem
            if low and math.isfinite(value) and value > limit:
                raise ConversionError(
                    where="model", step="graph I/O types", node=name,
                    problem=f"graph {role} {name!r} reaches {value:.6g} on the reference data "
                            f"({magnitudes.data_source}), beyond {options.low_precision_type}'s largest value "
                            f"{limit:g}: stored as {options.low_precision_type} it would be inf",
                    fix="keep the graph inputs/outputs in fp32 (keep_io_types=True, CLI --keep_io_types)")


def convert(model: onnx.ModelProto, *, options: ConvertOptions, magnitudes: Magnitudes | None,
            base_dir: Path | None = None) -> ConversionResult:
    """Classify every node from `magnitudes` (None = no data rule) and build the mixed-precision model.

    A lazily loaded model (``load_model(path, weights="lazy")``, `base_dir` = its folder) is converted without
    loading its weights: they are read one at a time for their figures, and converted when the result is saved.
    """
    original_inputs, original_outputs = io_types(model)
    work = onnx.ModelProto()
    work.CopyFrom(model)
    check_known_ops(work, options)
    check_io_range(work, options, magnitudes)
    work = prepare(work, target=options.target_opset, low_precision_type=options.low_precision_type,
                   custom_ops=set(options.custom_op_precisions()))
    info = build_info(work, observed_types=magnitudes.dtypes if magnitudes is not None else None,
                      base_dir=base_dir)
    sig_cache: SigCache = {}
    decisions = Classifier(work, info, options, magnitudes, sig_cache).run()
    nodes = list(work.graph.node)
    share, total, unknown = flop_share(nodes, lambda n: decisions[n.name].is_low, _shape_lookup(info, magnitudes),
                                       dict(info.initializers))
    state = Rewriter(work, info, decisions, options, sig_cache).run()
    validate(work, original_inputs=original_inputs, original_outputs=original_outputs,
             keep_io_types=options.keeps_io_types, low=options.low_elem)
    low_nodes = tuple(n.name for n in nodes if decisions[n.name].is_low)
    high_nodes = tuple((n.name, decisions[n.name].reason or "fp32") for n in nodes if not decisions[n.name].is_low)
    _log(options, decisions, nodes, share, total, unknown, len(state.ours))
    return ConversionResult(model=work, low_nodes=low_nodes, high_nodes=high_nodes, lowp_flop_share=share,
                            cast_count=sum(1 for n in work.graph.node if n.name in state.ours),
                            clamped=tuple(state.clamped), base_dir=base_dir if is_lazy(work) else None)


def _shape_lookup(info: GraphInfo, magnitudes: Magnitudes | None) -> Callable[[str], tuple[int, ...] | None]:
    """Shapes for FLOP estimates: the reference run's, else inferred ones with dynamic dims taken as 1
    (as the reference run does; the share is a ratio, so a common batch dim cancels)."""
    def shape_of(name: str) -> tuple[int, ...] | None:
        if magnitudes is not None and name in magnitudes.shapes:
            return tuple(magnitudes.shapes[name])
        shape = info.shapes.get(name)
        return None if shape is None else tuple(1 if d is None else d for d in shape)
    return shape_of


def _log(options: ConvertOptions, decisions: dict[str, Decision], nodes: list[onnx.NodeProto], share: float,
         total: int, unknown: int, casts: int) -> None:
    low = sum(1 for n in nodes if decisions[n.name].is_low)
    for node in nodes:
        decision = decisions[node.name]
        if not decision.is_low:
            LOG.info("keeping node %s (%s) out of %s: %s", node.name, node.op_type, options.low_precision_type,
                     decision.reason or "fp32")
        elif decision.reason:
            LOG.info("node %s (%s) in %s: %s", node.name, node.op_type, options.low_precision_type, decision.reason)
    LOG.info("Converted %d/%d nodes (%.2f%%) to %s; %.2f%% of %.3g estimated FLOPs in %s%s; %d casts inserted",
             low, len(nodes), 100.0 * low / max(len(nodes), 1), options.low_precision_type, 100.0 * share, total,
             options.low_precision_type, f" ({unknown} nodes with unknown shapes not counted)" if unknown else "",
             casts)
