"""The first tensor where a converted model leaves its FP32 original beyond tolerance (failing cases only).

Both models get every main-graph node output of the FP32 model marked as a graph output; the FP32 model
runs on ORT CPU and the converted one on ``emulate`` (the truthful low-precision oracle), once each, on the
golden's feeds. Tensors are matched by name (the converter keeps the original names; its Casts add new
ones, which are ignored) and compared in the FP32 graph's topological order with the same tolerance policy
as the outputs: each tensor's default tolerance scales with its own FP32 magnitude. The first one that
fails is the divergence; ``None`` when every shared tensor agrees (for instance when only a tolerance
override on an output made the case fail).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from harness.judge.paired import judge_outputs
from harness.data.feeds import cast_feeds, input_specs
from harness.data.recipes import Feed
from harness.runners import make_runner
from harness.judge.tolerances import TolerancePolicy


@dataclass(frozen=True)
class Divergence:
    """The first tensor (in topological order) where the converted model leaves FP32 beyond tolerance."""

    tensor: str
    node: str
    op: str
    max_abs: float
    max_rel: float


def with_outputs(model: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph also outputs ``names`` (untyped; the runtime infers their types)."""
    marked = onnx.ModelProto()
    marked.CopyFrom(model)
    present = {o.name for o in marked.graph.output}
    marked.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in present)
    return marked


def first_divergence(reference: onnx.ModelProto, converted: onnx.ModelProto, feeds: Sequence[Feed], *,
                     precision: str, policy: TolerancePolicy, model_dir: Path | None = None,
                     converted_dir: Path | None = None) -> Divergence | None:
    """See the module docstring. ``feeds`` are in the FP32 model's input dtypes (the golden's feeds);
    ``model_dir`` / ``converted_dir`` (default: ``model_dir``): the folders the models' external data is in."""
    produced = {out for node in converted.graph.node for out in node.output}
    order = [(out, node) for node in reference.graph.node for out in node.output if out and out in produced]
    names = [out for out, _ in order]
    expected = make_runner("ort", with_outputs(reference, names), model_dir=model_dir).run(feeds).outputs
    mixed = with_outputs(converted, names)
    obtained = make_runner("emulate", mixed, model_dir=converted_dir or model_dir).run(
        cast_feeds(feeds, input_specs(mixed))).outputs
    for name, node in order:
        result = judge_outputs([{name: it[name]} for it in obtained], [{name: it[name]} for it in expected],
                               precision=precision, policy=policy)
        if not result:
            (stats,) = result.outputs
            return Divergence(tensor=name, node=node.name, op=node.op_type, max_abs=float(stats.max_abs),
                              max_rel=float(stats.max_rel))
    return None
