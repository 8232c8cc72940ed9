"""Decide, per top-level node, which precision its float tensors get, and record why.

Order (first match wins):
1. Structure: user Casts, nodes without float tensors, control flow, attribute-typed outputs (Constant,
   ConstantOfShape, Random*), and non-ONNX-domain ops (com.microsoft...) keep their types, unless
   ``custom_ops`` gives a custom op a precision.
1b. QDQ (:mod:`harness.convert.qdq`): QuantizeLinear/DequantizeLinear, every op reading a DequantizeLinear's
   output and every op feeding a QuantizeLinear keep FP32 (the quantized pattern DQ -> op -> Q that int8 back
   ends fuse is never split by Casts); ``node_precisions`` cannot override it.
2. ``node_precisions`` (node name or op type): explicit, wins over everything below; an impossible
   request (the schema lacks the type) is a ConversionError.
3. ``respect_existing_types``: nodes already in fp16/bf16 keep it; fp32 nodes stay fp32 unless included.
4. Schema legality at the model's opset (onnx.defs): no low type in a type variable of a float output
   -> FP32; likewise an op with no kernel in the low type on the ``target`` (:mod:`harness.convert.targets`).
   Include lists cannot override this.
5. Exclusions (overridden by nodes_to_include / op_types_to_include): nodes_to_exclude (re.match,
   anchored at the start), op_types_to_exclude, init_max, data_max (float tensors only; non-finite =
   inf), max_depth_of_reduction, and consumers of the user's explicit upcast (Cast to FLOAT/DOUBLE from
   an equal or narrower float type).
6. Everything else -> the low precision type.
7. Afterwards, denominators (with magnitudes): a Div (or a Pow with a possibly negative exponent) whose
   denominator went below the low type's smallest normal in FP32 stays FP32, and so does the node producing
   that denominator (:func:`harness.convert.denominators.guard_denominators`); explicit node_precisions and
   include lists win.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

import onnx
from onnx import TensorProto

from harness.convert.decision import Decision, elem_name, existing_elem, float_names, schema_problem
from harness.convert.denominators import guard_denominators
from harness.convert.depth import reduction_depth
from harness.convert.graphinfo import GraphInfo, SigCache, Signature, domain_of, signature
from harness.convert.magnitudes import Magnitudes
from harness.convert.options import ConvertOptions
from harness.convert.qdq import QDQ, QUANT_OPS, qdq_nodes
from harness.convert.subgraphs import nested_nodes
from harness.convert.targets import load_target
from harness.core.dtypes import FLOAT_TYPES, LOW_ELEMS, PRECISION_ELEMS
from harness.core.errors import ConversionError

LOG = logging.getLogger("harness.convert")
CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_UPCASTS = frozenset(
    (s, t)
    for t in (TensorProto.FLOAT, TensorProto.DOUBLE)
    for s in (TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, t)
)


def _structural(
    node: onnx.NodeProto, sig: Signature | None, info: GraphInfo, custom: Mapping[str, int]
) -> Decision | None:
    if node.op_type in custom and (sig is None or domain_of(node)):
        return Decision(custom[node.op_type], f"custom_ops: {elem_name(custom[node.op_type])}")
    if domain_of(node) == "" and node.op_type in ("Cast", "BitCast"):
        return Decision(None, f"user {node.op_type.lower()}: kept as is")
    if (
        any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        or node.op_type in CONTROL_FLOW
    ):
        return Decision(None, "control flow: bodies kept in their original types")
    if sig is None:
        return Decision(None, f"domain {node.domain or 'ai.onnx'}: op {node.op_type} is never rewritten")
    if not float_names(node, info):
        return Decision(None, "no float tensors")
    untyped = [n for n in [*node.input, *node.output] if n and n not in info.types]
    if untyped:
        return Decision(None, f"type of {untyped[0]!r} unknown to shape inference")
    in_params = set(sig.inputs)
    for name, param in zip(node.output, sig.outputs):
        if name and info.is_float(name) and sig.is_var(param) and param not in in_params:
            return Decision(None, "output type set by an attribute")
    return None


class Classifier:
    """Applies the rules above to every top-level node of one prepared model."""

    def __init__(
        self,
        model: onnx.ModelProto,
        info: GraphInfo,
        options: ConvertOptions,
        magnitudes: Magnitudes | None,
        sig_cache: SigCache,
    ) -> None:
        self.model, self.info, self.options, self.magnitudes = model, info, options, magnitudes
        self.sig_cache = sig_cache
        self.exclude = [re.compile(p) for p in options.nodes_to_exclude]
        self.include = [re.compile(p) for p in options.nodes_to_include]
        self.precisions = dict(options.node_precisions)
        self.custom = options.custom_op_precisions()
        self.qdq = qdq_nodes(model.graph.node)

    def run(self, *, warn: bool = True) -> dict[str, Decision]:
        nodes = self.model.graph.node
        used_keys = {k for k in self.precisions if any(k in (n.name, n.op_type) for n in nodes)}
        unused = sorted(set(self.precisions) - used_keys)
        if unused:
            raise ConversionError(
                where="node_precisions",
                step="classify",
                problem=f"keys {unused} match no node name or op type in the model",
                fix="use names or op types that exist, e.g. " + ", ".join(sorted({n.op_type for n in nodes})[:8]),
            )
        if warn:
            self.warn_unmatched()
            if self.qdq:
                quant = sum(1 for n in nodes if n.op_type in QUANT_OPS)
                LOG.info(
                    "QDQ model: %d QuantizeLinear/DequantizeLinear node(s); they and the %d op(s) between them keep "
                    "their quantized/FP32 types (DQ -> op -> Q is never split by Casts), the rest is converted",
                    quant,
                    len(self.qdq) - quant,
                )
        decisions = {node.name: self.decide(node) for node in nodes}
        if self.magnitudes is not None:  # rule 7
            guard_denominators(decisions, nodes, self.info, self.magnitudes, self.options)
        return decisions

    def warn_unmatched(self) -> None:
        """A node pattern or op type (to exclude or include) that matches nothing in the model gets a warning
        naming it: usually a typo, or a re.match pattern that needs a leading '.*'. Nodes inside If/Loop/Scan
        bodies count (they stay in their own types: such an exclusion holds)."""
        nodes = list(nested_nodes(self.model.graph))
        names, ops = [n.name for n in nodes], {n.op_type for n in nodes}
        for option, patterns in (("nodes_to_exclude", self.exclude), ("nodes_to_include", self.include)):
            for pattern in patterns:
                if not any(pattern.match(name) for name in names):
                    LOG.warning(
                        "%s pattern %r matches no node name (re.match anchors at the start: use '.*%s' "
                        "for a substring)",
                        option,
                        pattern.pattern,
                        pattern.pattern,
                    )
        for option, op_types in (
            ("op_types_to_exclude", self.options.op_types_to_exclude),
            ("op_types_to_include", self.options.op_types_to_include),
        ):
            for op_type in op_types:
                if op_type not in ops:
                    LOG.warning(
                        "%s: op type %r matches no node (op types in the model: %s)",
                        option,
                        op_type,
                        ", ".join(sorted(ops)[:12]),
                    )

    def decide(self, node: onnx.NodeProto) -> Decision:
        sig = signature(node, self.info.opsets, self.sig_cache)
        structural = _structural(node, sig, self.info, self.custom)
        if structural is not None:
            return structural
        assert sig is not None
        low = self.options.low_elem
        high = TensorProto.DOUBLE if existing_elem(node, self.info) == TensorProto.DOUBLE else TensorProto.FLOAT
        if node.name in self.qdq:
            return Decision(high, f"{QDQ}: {self.qdq[node.name]}")
        key = node.name if node.name in self.precisions else node.op_type
        if key in self.precisions:
            elem = PRECISION_ELEMS[self.precisions[key]]
            problem = schema_problem(node, sig, self.info, elem) if elem in LOW_ELEMS else None
            if problem:
                raise ConversionError(
                    where="node_precisions",
                    step="classify",
                    node=node.name,
                    problem=f"{key}:{self.precisions[key]} cannot be honoured ({problem})",
                    fix="pick fp32 for this node, or raise the opset (opset=...)",
                )
            return Decision(high if elem == TensorProto.FLOAT else elem, f"node_precisions: {self.precisions[key]}")
        included = self._included(node)
        if self.options.respect_existing_types:
            existing = existing_elem(node, self.info)
            if existing in LOW_ELEMS:
                return Decision(existing, "respect_existing_types")
            if not included:
                return Decision(high, "respect_existing_types: typed fp32 in the model")
        problem = schema_problem(node, sig, self.info, low) or self._target_problem(node)
        if problem:
            return Decision(high, problem)
        reason = self._excluded(node)
        if reason and not included:
            return Decision(high, reason)
        return Decision(low, f"included ({included}) despite {reason}" if reason else "")

    def _target_problem(self, node: onnx.NodeProto) -> str | None:
        table = load_target(self.options.target)
        return None if table is None else table.problem(node.op_type, self.options.low_precision_type)

    def _included(self, node: onnx.NodeProto) -> str:
        hit = next((p.pattern for p in self.include if p.match(node.name)), None)
        if hit is not None:
            return f"nodes_to_include {hit!r}"
        return "op_types_to_include" if node.op_type in self.options.op_types_to_include else ""

    def _excluded(self, node: onnx.NodeProto) -> str:
        hit = next((p.pattern for p in self.exclude if p.match(node.name)), None)
        if hit is not None:
            return f"nodes_to_exclude: {node.name!r} matches {hit!r}"
        if node.op_type in self.options.op_types_to_exclude:
            return f"op_types_to_exclude: {node.op_type}"
        return self._init_reason(node) or self._data_reason(node) or self._depth_reason(node) or self._cast_reason(node)

    def _init_reason(self, node: onnx.NodeProto) -> str:
        for name in node.input:
            value = self.info.constant_absmax(name) if name else None
            if value is not None and value > self.options.init_max:
                return f"init_max: initializer {name!r} absmax {value:.6g} > {self.options.init_max:g}"
        return ""

    def _data_reason(self, node: onnx.NodeProto) -> str:
        if self.magnitudes is None:
            return ""
        limit = self.options.data_max
        for role, names in (("input", node.input), ("output", node.output)):
            for name in names:
                if not name or name in self.info.initializers or name in self.info.constants:
                    continue
                if self.info.types.get(name, self.magnitudes.dtypes.get(name)) not in FLOAT_TYPES:
                    continue
                value = self.magnitudes.absmax.get(name)
                if value is not None and value > limit:
                    return f"data_max: {role} {name!r} absmax {value:.6g} > {limit:g}"
        return ""

    def _shape(self, name: str) -> tuple[int | None, ...] | None:
        if self.magnitudes is not None and name in self.magnitudes.shapes:
            return self.magnitudes.shapes[name]
        return self.info.shapes.get(name)

    def _depth_reason(self, node: onnx.NodeProto) -> str:
        limit = self.options.max_depth_of_reduction
        if limit is None:
            return ""
        reduces, depth = reduction_depth(node, self._shape, self.info.initializers)
        if not reduces:
            return ""
        if depth is None:
            return "max_depth_of_reduction: depth unknown (dynamic or uninferred shape), kept FP32 to be safe"
        return f"max_depth_of_reduction: depth {depth} > {limit}" if depth > limit else ""

    def _cast_reason(self, node: onnx.NodeProto) -> str:
        nodes = self.model.graph.node
        for name in node.input:
            producer = self.info.producers.get(name)
            if producer is None:
                continue
            cast = nodes[producer]
            if cast.op_type != "Cast" or domain_of(cast) != "":
                continue
            to = next((a.i for a in cast.attribute if a.name == "to"), None)
            source = self.info.types.get(cast.input[0])
            if to is not None and (source, to) in _UPCASTS and (source != to or self.options.respect_fp32_casts):
                return f"user cast: input {name!r} is an explicit Cast to {elem_name(to)}"
        return ""
