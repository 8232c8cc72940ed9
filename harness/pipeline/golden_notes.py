"""A golden made, and what is said about it when it is made. No pytest here.

* :func:`produce_golden`: the recipe's feeds run on ORT CPU FP32;
* :func:`written_message`: the message of a just-written golden: where it is, what made it, the fix;
* :func:`golden_run_failed`: onnxruntime failed while running the FP32 model: one error per model with
  onnxruntime's message, the inputs used (names, shapes, dtypes, value ranges) and the fix;
* :func:`non_finite_note`: a golden with NaN or inf says so when it is written: how many values, which output,
  the first node that produces them, and the likely fix (``--val-range``).

The first node is found as Polygraphy's mark-all does: the FP32 model is run once more on ORT CPU (public API,
through :func:`harness.runners.make_runner`) on the first iteration with non-finite outputs, with every main-graph
node output marked as a graph output; nodes are visited in graph (topological) order and the first one whose output
holds a NaN or inf is named. The counting itself is :func:`harness.data.degenerate.non_finite`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from harness.core.dtypes import BFLOAT16
from harness.core.errors import GoldenRunFailed, RunnerError, RunnerUnavailable, UserError
from harness.data.degenerate import non_finite
from harness.data.goldens import Golden
from harness.data.marked import with_outputs
from harness.data.models import ModelSpec
from harness.data.recipes import Feed, InputRecipe, describe_inputs
from harness.data.rerun import rerun_command
from harness.pipeline.plan import LoadedModel
from harness.runners import FP32_RUNNER, make_runner


@dataclass(frozen=True)
class FirstNonFinite:
    """The first node (graph order) whose output holds NaN or inf on the golden's inputs."""

    node: str
    op: str
    tensor: str
    count: int
    total: int

    def describe(self) -> str:
        return (
            f"first produced by node {self.node!r} ({self.op}): its output {self.tensor!r} has {self.count} of "
            f"{self.total} values not finite"
        )


def first_non_finite(model: onnx.ModelProto, feed: Feed, *, model_dir: Path | None) -> FirstNonFinite | str:
    """The first node producing NaN/inf on ``feed``, or why it could not be found (ORT refused the marked model)."""
    names = [out for node in model.graph.node for out in node.output if out]
    try:
        outputs = make_runner(FP32_RUNNER, with_outputs(model, names), model_dir=model_dir).run([feed]).outputs[0]
    except (RunnerError, RunnerUnavailable, UserError) as err:  # the runner wraps onnxruntime's errors
        return f"the model with every node output marked did not run on ORT CPU ({str(err).splitlines()[0]})"
    for node in model.graph.node:
        for out in (o for o in node.output if o in outputs):
            values = np.asarray(outputs[out])
            if values.dtype == BFLOAT16:
                values = values.astype(np.float32)
            if values.dtype.kind in "fc" and not np.isfinite(values).all():
                bad = int((~np.isfinite(values)).sum())
                return FirstNonFinite(
                    node=node.name or f"#{list(model.graph.node).index(node)}",
                    op=node.op_type,
                    tensor=out,
                    count=bad,
                    total=int(values.size),
                )
    return "no main-graph node output holds them (a subgraph or the inputs do)"


def non_finite_note(
    model: onnx.ModelProto, golden: Golden, *, model_dir: Path | None, input_lines: Sequence[str], rerun: str
) -> str:
    """The lines that say a just-written golden holds NaN or inf, where they come from and the likely fix;
    ``""`` when every output is finite."""
    found = non_finite(golden.outputs)
    if not found:
        return ""
    first = first_non_finite(model, golden.feeds[min(f.iteration for f in found)], model_dir=model_dir)
    where = first.describe() if isinstance(first, FirstNonFinite) else f"first node not found: {first}"
    name = next(iter(golden.feeds[0]), "NAME") if golden.feeds else "NAME"  # the model's first input
    return "\n".join(
        [
            "  WARNING: this golden is not finite, so every comparison against it is weak:",
            *(f"    {f.describe()}" for f in found),
            f"    {where}",
            f"    inputs used: {'; '.join(input_lines)}",
            "  likely fix: the inputs are outside the range the model is defined on (Log, Sqrt, Div, Pow of such "
            f"values give NaN/inf); give realistic ranges with --val-range and rewrite the golden: "
            f"{_without_range(rerun, name)} --val-range '{name}:[LO,HI]' --update-goldens",
        ]
    )


def _without_range(command: str, name: str) -> str:
    """``command`` without its own ``--val-range`` for input ``name`` (the fix gives that input a new range)."""
    return re.sub(rf"\s--val-range[ =]'?{re.escape(name)}:[^\s]*", "", command)


def golden_run_failed(
    spec: ModelSpec, recipe: InputRecipe, feeds: Sequence[Feed], err: RunnerError, *, input_lines: Sequence[str]
) -> GoldenRunFailed:
    """onnxruntime's message, the inputs that were used (names, shapes, dtypes, value ranges) and the fix."""
    used = [
        f"{n} {a.dtype}[{'x'.join(map(str, a.shape))}]"
        + (f" values in [{a.min():g}, {a.max():g}]" if a.size and a.dtype.kind in "fiub" else "")
        for n, a in (feeds[0].items() if feeds else ())
    ]
    return GoldenRunFailed(
        where=spec.path,
        problem=f"onnxruntime (CPU, FP32) failed while making the golden of {spec.name!r}: "
        f"{str(err).strip()}\n  inputs used: {'; '.join(used) or 'none'}\n  how they were made: "
        f"{'; '.join(input_lines)}",
        model=spec.name,
        runtime_message=str(err),
        fix="give inputs this model accepts: --input-shapes NAME:DIMS for its dynamic dimensions (no 0; lengths "
        "that agree with each other), --val-range NAME:[lo,hi] within what the model indexes (ids below the "
        f"table's rows), or --inputs FILE with real data, then rerun: {rerun_command(spec, recipe)}",
    )


def produce_golden(loaded: LoadedModel, *, run_id: str | None = None) -> Golden:
    """Run the recipe's feeds on ORT CPU FP32; onnxruntime's failure is :class:`GoldenRunFailed` (its message, the
    inputs used, the fix). ``run_id``: the run writing it (sidecar ``written_in_run``), so that every check of that
    run knows the golden is not reviewed yet."""
    try:
        result = make_runner(FP32_RUNNER, loaded.model, model_dir=loaded.spec.path.parent).run(loaded.feeds)
    except RunnerError as err:
        raise golden_run_failed(loaded.spec, loaded.recipe, loaded.feeds, err, input_lines=loaded.input_lines) from None
    meta = {"producer": result.runner, "inputs": describe_inputs(loaded.model, loaded.recipe, loaded.feeds)}
    if run_id is not None:
        meta["written_in_run"] = run_id
    return Golden(feeds=loaded.feeds, outputs=result.outputs, meta=meta)


def written_message(loaded: LoadedModel, path: Path, golden: Golden, *, rerun: str) -> str:
    """The message of a just-written golden; one holding NaN/inf says so (:func:`non_finite_note`)."""
    note = non_finite_note(
        loaded.model, golden, model_dir=loaded.spec.path.parent, input_lines=loaded.input_lines, rerun=rerun
    )
    return "\n".join(
        [
            f"{loaded.spec.name}: golden written (it was missing, or --update-goldens): {path}",
            f"  {len(golden.feeds)} iteration(s) from {loaded.recipe.id}, produced by {golden.meta.get('producer')}",
            *([note] if note else []),
            f"  fix: review it, commit it, and rerun: `{rerun}` then compares against it",
        ]
    )
