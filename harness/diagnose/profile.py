"""The divergence profile: the error of every tensor, in graph order, against the FP32 run's own intermediates.

Both models get every main-graph node output of the FP32 model marked as a graph output (Polygraphy's
``mark all``); the FP32 model runs once on ORT CPU and the converted one once on ``emulate`` (the truthful
low-precision oracle), on the golden's feeds. Tensors are matched by name (the converter keeps the original
names; its Casts add new ones, which are ignored) and judged in the FP32 graph's topological order with the
case's tolerance policy: each tensor's default tolerance scales with its own FP32 magnitude.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from harness.data.feeds import cast_feeds, input_specs
from harness.data.marked import with_outputs
from harness.data.recipes import Feed
from harness.diagnose.facts import TensorError
from harness.judge.paired import judge_outputs
from harness.judge.tolerances import TolerancePolicy
from harness.runners import make_runner
from harness.tune.bound import scaled_error


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


def _absmax(arrays: Sequence[np.ndarray]) -> float:
    values = [np.abs(np.asarray(a, dtype=np.float64)) for a in arrays if np.asarray(a).size]
    finite = [v[np.isfinite(v)] for v in values]
    return max((float(v.max()) for v in finite if v.size), default=0.0)


def divergence_profile(
    reference: onnx.ModelProto,
    converted: onnx.ModelProto,
    feeds: Sequence[Feed],
    *,
    precision: str,
    policy: TolerancePolicy,
    model_dir: Path | None = None,
    converted_dir: Path | None = None,
) -> Profile:
    """See the module docstring. ``feeds`` are in the FP32 model's input dtypes (the golden's feeds);
    ``model_dir`` / ``converted_dir`` (default: ``model_dir``): the folders the models' external data is in."""
    produced = {out for node in converted.graph.node for out in node.output}
    order = [(out, node) for node in reference.graph.node for out in node.output if out and out in produced]
    names = [out for out, _ in order]
    expected = make_runner("ort", with_outputs(reference, names), model_dir=model_dir).run(feeds).outputs
    mixed = with_outputs(converted, names)
    obtained = (
        make_runner("emulate", mixed, model_dir=converted_dir or model_dir)
        .run(cast_feeds(feeds, input_specs(mixed)))
        .outputs
    )
    computed = computed_tensors(reference.graph)
    rows: list[TensorError] = []
    absmax: dict[str, float] = {}
    stats: dict[str, tuple[float, float]] = {}
    for name, node in order:
        gold = [np.asarray(it[name]) for it in expected]
        got = [np.asarray(it[name]) for it in obtained]
        if not all(np.issubdtype(g.dtype, np.floating) for g in gold):
            continue
        verdict = judge_outputs([{name: g} for g in got], [{name: g} for g in gold], precision=precision, policy=policy)
        absmax[name] = _absmax(gold)
        (figures,) = verdict.outputs
        stats[name] = (float(figures.max_abs), float(figures.max_rel))
        rows.append(
            TensorError(
                tensor=name,
                node=node.name,
                op=node.op_type,
                error=scaled_error(zip(got, gold)),
                passed=bool(verdict),
                computed=name in computed,
            )
        )
    return Profile(
        rows=tuple(rows), fp32_absmax=absmax, outputs=tuple(o.name for o in reference.graph.output), stats=stats
    )
