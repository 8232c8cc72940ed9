"""What the converter refuses before it converts: an op that is neither ONNX at the model's opset, an
onnxruntime contrib op nor a declared custom op; a graph input or output whose reference values the low type
cannot hold."""

from __future__ import annotations

import math

import onnx
from onnx import defs

from harness.convert.graphinfo import domain_of
from harness.convert.magnitudes import Magnitudes
from harness.convert.options import ConvertOptions
from harness.convert.validate import expected_io_type, io_types
from harness.core.dtypes import LOW_MAX
from harness.core.errors import ConversionError

RUNTIME_DOMAINS = ("com.microsoft",)
"""Non-ONNX domains onnxruntime implements: their ops are known, never rewritten, kept in their types."""


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
            where="model",
            step="classify",
            node=node.name,
            problem=f"op {node.op_type!r} (domain {domain or 'ai.onnx'!r}, opset {version}) is not an ONNX op at "
            "this opset and not declared as a custom op",
            fix=f"declare it: custom_ops=['{node.op_type}'] (CLI --custom_ops {node.op_type}[:fp16]), "
            "or fix the model's opset_import",
        )


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
                    where="model",
                    step="graph I/O types",
                    node=name,
                    problem=f"graph {role} {name!r} reaches {value:.6g} on the reference data "
                    f"({magnitudes.data_source}), beyond {options.low_precision_type}'s largest value "
                    f"{limit:g}: stored as {options.low_precision_type} it would be inf",
                    fix="keep the graph inputs/outputs in fp32 (keep_io_types=True, CLI --keep_io_types)",
                )
