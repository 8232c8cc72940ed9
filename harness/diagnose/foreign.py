"""The diagnosis of another converter's failing output (``--converter`` other than castguard, ``--candidate``).

Only the first-divergence search applies: castguard's fix (convert again with nodes kept FP32) would be castguard's
conversion, not a fix of this one, so none is run or printed. The search matches tensors by name; a fused graph
(onnxruntime's Attention, SkipLayerNormalization...) has no tensor with the names of the FP32 nodes it replaced.
Those FP32 nodes are the part the search cannot follow; when such a part comes before the first divergence it
found, that divergence may have started inside the part, so no cause is named: the diagnosis says which part it
could not follow and where the error was first seen. Where emulate cannot run the converted graph at all (a fused
op on fp16 tensors), the diagnosis says that, and names no cause.
"""

from __future__ import annotations

from dataclasses import replace

import onnx

from harness.core.errors import RunnerError, RunnerUnavailable
from harness.diagnose.facts import Diagnosis
from harness.diagnose.failure import cause_of
from harness.diagnose.profile import ModelPair, computed_tensors, divergence_profile

_SHOWN = 6


def unfollowed(reference: onnx.ModelProto, converted: onnx.ModelProto) -> list[str]:
    """FP32 nodes (names, graph order) whose computed outputs the converted graph does not have."""
    produced = {out for node in converted.graph.node for out in node.output}
    computed = computed_tensors(reference.graph)
    return [
        node.name or node.op_type
        for node in reference.graph.node
        if any(o in computed and o not in produced for o in node.output if o)
    ]


def diagnose_foreign(pair: ModelPair, *, converter: str) -> Diagnosis:
    """See the module docstring."""
    reference, converted = pair.reference, pair.converted
    try:
        profile = divergence_profile(pair)
    except (RunnerUnavailable, RunnerError) as err:
        return Diagnosis(cause=None, problem=f"the first-divergence search could not run: {err}", converter=converter)
    facts = Diagnosis(cause=cause_of(reference, profile), profile=profile.rows, converter=converter)
    missing = unfollowed(reference, converted)
    if not missing:
        return facts
    order = [n.name or n.op_type for n in reference.graph.node]
    shown = ", ".join(missing[:_SHOWN]) + (f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else "")
    part = f"{len(missing)} FP32 node(s) have no tensor of the same name in {converter}'s graph ({shown})"
    cause = facts.cause
    if cause is not None and cause.node in order and order.index(cause.node) > order.index(missing[0]):
        return replace(
            facts,
            cause=None,
            problem=f"the first-divergence search could not follow {part}; the error was first seen at "
            f"{cause.tensor!r} ({cause.op}), after that part, so it may have started inside it: no cause is named",
        )
    return replace(facts, problem=f"the first-divergence search could not follow {part}")
