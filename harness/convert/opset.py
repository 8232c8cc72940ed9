"""Bring a model to the target opset with onnx's version converter (never a relabel), and normalise it.

Normalisation, done on the converter's own copy:
- unnamed nodes get stable names ``<OpType>_<index>`` (classification and logs refer to names);
- declared custom ops in the default domain move to ``trt.plugins``;
- initializers that IR-3 models also list as graph inputs are dropped from the inputs (IR >= 4 then);
- the IR version is raised to the minimum the final opsets need, never lowered.
"""

from __future__ import annotations

import logging

import onnx
from onnx import helper, version_converter

from harness.core.dtypes import MIN_OPSET
from harness.core.errors import ConversionError

LOG = logging.getLogger("harness.convert")
CUSTOM_DOMAIN = "trt.plugins"


def name_nodes(model: onnx.ModelProto) -> None:
    taken = {node.name for node in model.graph.node if node.name}
    for index, node in enumerate(model.graph.node):
        if node.name:
            continue
        name = f"{node.op_type}_{index}"
        while name in taken:
            name += "_"
        node.name = name
        taken.add(name)


def drop_initializer_inputs(model: onnx.ModelProto) -> int:
    """Remove graph inputs that are initializers (IR < 4 style). Returns how many were removed."""
    inits = {init.name for init in model.graph.initializer}
    kept = [vi for vi in model.graph.input if vi.name not in inits]
    removed = len(model.graph.input) - len(kept)
    if removed:
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model.ir_version = max(model.ir_version, 4)
    return removed


def move_custom_ops(model: onnx.ModelProto, custom: set[str]) -> int:
    """Declared custom ops in the default domain move to ``trt.plugins`` (as AutoCast does) so the model
    stays valid ONNX; TensorRT finds plugins by op type. Returns how many nodes moved."""
    moved = 0
    for node in model.graph.node:
        if node.op_type in custom and node.domain in ("", "ai.onnx"):
            node.domain = CUSTOM_DOMAIN
            moved += 1
    if moved and all(o.domain != CUSTOM_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(CUSTOM_DOMAIN, 1))
    if moved:
        LOG.info("%d custom op node(s) moved to domain %s", moved, CUSTOM_DOMAIN)
    return moved


def default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return int(opset.version)
    return 1


def upgrade(model: onnx.ModelProto, *, target: int, low_precision_type: str) -> onnx.ModelProto:
    """Return `model` at default-domain opset >= `target`, converted by onnx.version_converter."""
    if all(o.domain not in ("", "ai.onnx") for o in model.opset_import):
        # no default-domain node to convert (e.g. an ai.onnx.ml-only model): the Casts the converter may insert
        # need the default domain, which starts at the target opset
        model.opset_import.append(helper.make_opsetid("", target))
        LOG.info("model imports no default-domain opset: ai.onnx opset %d added for inserted Casts", target)
        return model
    current = default_opset(model)
    if current >= target:
        LOG.info("model opset %d >= target %d: kept (never downgraded)", current, target)
        return model
    try:
        converted = version_converter.convert_version(model, target)
    except (RuntimeError, ValueError, IndexError, onnx.checker.ValidationError) as err:
        need = "bf16 needs opset 22 for most ops" if low_precision_type == "bf16" else f"opset {target} was requested"
        raise ConversionError(
            where="opset",
            step="opset upgrade",
            problem=f"onnx's version converter cannot bring the model from opset {current} to {target} "
            f"({need}): {str(err).strip()[:500]}",
            fix=f"upgrade the model yourself (e.g. re-export at opset {target}), or pass opset={current} to convert "
            "at the current opset (ops whose schema lacks the low type there stay FP32)",
        ) from None
    changed = [a for a, b in zip(_io_signature(model), _io_signature(converted)) if a != b]
    if changed or len(model.graph.input) != len(converted.graph.input):
        LOG.warning(
            "onnx's version converter would change the model's inputs/outputs going from opset %d to %d "
            "(%s), so the model keeps opset %d: ops whose schema lacks %s there stay FP32; re-export at "
            "opset %d for more low-precision ops",
            current,
            target,
            ", ".join(name for name, *_ in changed) or "their number",
            current,
            low_precision_type,
            target,
        )
        return model
    LOG.info("opset %d -> %d (onnx.version_converter)", current, target)
    return converted


def _io_signature(model: onnx.ModelProto) -> list[tuple[str, int, tuple[str, ...] | None]]:
    """(name, element type, dims) of every graph input and output, in order."""
    result = []
    for value in [*model.graph.input, *model.graph.output]:
        tensor = value.type.tensor_type
        dims = tuple(d.dim_param or str(d.dim_value) for d in tensor.shape.dim) if tensor.HasField("shape") else None
        result.append((value.name, tensor.elem_type, dims))
    return result


def warn_requested_opset(model: onnx.ModelProto, *, opset: int | None, low_precision_type: str) -> None:
    """AutoCast's warnings, in its words, for an explicit ``opset`` below what the low type needs or below the
    model's own (castguard never downgrades: the model keeps its opset)."""
    if opset is None:
        return
    recommended = MIN_OPSET[low_precision_type]
    if opset < recommended:
        LOG.warning(
            "Opset %d has limited %s support. Recommended minimum opset is %d. The conversion may fail or "
            "produce unexpected results.",
            opset,
            low_precision_type.upper(),
            recommended,
        )
    original = default_opset(model)
    if opset < original:
        LOG.warning(
            "Specified opset %d is lower than the original model's opset %d. castguard never downgrades: "
            "the model keeps opset %d.",
            opset,
            original,
            original,
        )


def fix_ir_version(model: onnx.ModelProto) -> None:
    needed = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    model.ir_version = max(model.ir_version, needed)


def drop_stale_value_info(model: onnx.ModelProto) -> int:
    """Drop the model's own ``value_info`` (re-inferred by onnx; a stale or wrong declared shape would fail the
    final strict check) except for outputs of non-ONNX-domain nodes, which inference cannot type."""
    keep = {name for node in model.graph.node if node.domain not in ("", "ai.onnx") for name in node.output}
    kept = [vi for vi in model.graph.value_info if vi.name in keep]
    dropped = len(model.graph.value_info) - len(kept)
    if dropped:
        del model.graph.value_info[:]
        model.graph.value_info.extend(kept)
    return dropped


def spell_function_defaults(model: onnx.ModelProto) -> int:
    """Write out the default of every attribute a default-domain function op leaves out (top-level graph).

    An op defined by a function body reads its attributes by reference; onnx's inference of some bodies fails
    when the attribute is absent, e.g. ``MeanVarianceNormalization`` without ``axes`` at opset 13 ("One and only
    one of the attributes 'value', ... must be specified for a Constant node"): the model as written, and so
    its conversion, is then invalid under ``onnx.checker`` full check. The default, spelled out, means the
    same. Returns the number of attributes written."""
    opset = default_opset(model)
    written = 0
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset)
        except onnx.defs.SchemaError:
            continue
        if not (getattr(schema, "has_function", False) or getattr(schema, "has_context_dependent_function", False)):
            continue
        present = {a.name for a in node.attribute}
        for name, attr in schema.attributes.items():
            if name not in present and attr.default_value.name:
                default = onnx.AttributeProto()
                default.CopyFrom(attr.default_value)
                node.attribute.append(default)
                written += 1
    return written


def prepare(model: onnx.ModelProto, *, target: int, low_precision_type: str, custom_ops: set[str]) -> onnx.ModelProto:
    """Copy-free preparation of the converter's working copy: names, value_info, IR-3 inputs, custom ops,
    opset, IR."""
    name_nodes(model)
    move_custom_ops(model, custom_ops)
    drop_stale_value_info(model)
    if drop_initializer_inputs(model):
        LOG.info("initializers listed as graph inputs (IR %d style) are no longer inputs", model.ir_version)
    model = upgrade(model, target=target, low_precision_type=low_precision_type)
    spell_function_defaults(model)
    fix_ir_version(model)
    return model
