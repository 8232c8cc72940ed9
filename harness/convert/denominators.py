"""Rule 7 of the classification (:mod:`harness.convert.classify`): a denominator the reference run saw below the
low type's smallest normal keeps its Div or Pow, and the node producing it, in FP32."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import onnx
from onnx import TensorProto

from harness.convert.decision import Decision, existing_elem
from harness.convert.graphinfo import GraphInfo, domain_of
from harness.convert.magnitudes import Magnitudes
from harness.convert.options import ConvertOptions
from harness.core.dtypes import FLOAT_TYPES, LOW_ELEMS, np_dtype


def guard_denominators(
    decisions: dict[str, Decision],
    nodes: Sequence[onnx.NodeProto],
    info: GraphInfo,
    magnitudes: Magnitudes,
    options: ConvertOptions,
) -> None:
    """A denominator (``b`` of ``Div(a, b)``; the base of a ``Pow`` whose exponent may be
    negative) is below the low type's smallest normal when the reference run saw a non-zero value that
    small (``Magnitudes.absmin``; for magnitudes without it: its max, or for Div the bound
    max|a| / max|a/b| at the largest quotient). fp16 would flush or blur it (x/0 = inf, 0/0 = NaN), so the
    node and the one producing the denominator stay FP32 (only the direct producer: a low tensor reshaped
    on its way is not traced); explicit node_precisions and include lists win. Regressions in
    tests/property/test_fuzz_convert.py: DIV_UNDERFLOW, ZERO_OVER_TINY, PARTLY_TINY and POW_NEGATIVE."""
    tiny = float(ml_dtypes.finfo(np_dtype(options.low_elem)).tiny)  # type: ignore[no-untyped-call]
    for node in nodes:
        index = _denominator_index(node, info)
        bound = math.inf if index is None else _smallest_denominator(node, index, info, magnitudes)
        if index is None or bound >= tiny:
            continue
        name = node.input[index]
        reason = (
            f"denominator: {name!r} of {node.op_type} {node.name!r} reaches {bound:.3g}, "
            f"below {options.low_precision_type}'s smallest normal {tiny:.3g}"
        )
        producer = info.producers.get(name)
        for target in [node, *([nodes[producer]] if producer is not None else [])]:
            decision = decisions[target.name]
            if decision.is_low and not decision.reason.startswith(("node_precisions", "included")):
                high = existing_elem(target, info)
                decisions[target.name] = Decision(high if high not in LOW_ELEMS else TensorProto.FLOAT, reason)


def _denominator_index(node: onnx.NodeProto, info: GraphInfo) -> int | None:
    if domain_of(node) or len(node.input) < 2 or node.op_type not in ("Div", "Pow"):
        return None
    if node.op_type == "Div":
        return 1
    exponent = info.constant(node.input[1])
    if exponent is not None and info.weights.nonnegative(exponent):
        return None
    return 0


def _smallest_denominator(node: onnx.NodeProto, index: int, info: GraphInfo, magnitudes: Magnitudes) -> float:
    """The smallest non-zero |denominator| the FP32 data shows or implies (inf: nothing known)."""
    name = node.input[index]
    tensor = info.constant(name)
    if tensor is not None and tensor.data_type in FLOAT_TYPES:
        return info.weights.absmin(tensor)
    candidates = [magnitudes.absmin.get(name, 0.0), magnitudes.absmax.get(name, 0.0)]
    quotient = magnitudes.absmax.get(node.output[0], 0.0)
    numerator = info.constant_absmax(node.input[0])
    numerator = magnitudes.absmax.get(node.input[0]) if numerator is None else numerator
    if node.op_type == "Div" and numerator is not None and 0 < quotient < math.inf:
        candidates.append(numerator / quotient)
    return min((c for c in candidates if 0 < c < math.inf), default=math.inf)
