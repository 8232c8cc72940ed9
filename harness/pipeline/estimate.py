"""What a step of a case will cost, said before it starts when it is not bounded by one forward (issue 31). No pytest.

Converting, running and judging a case each cost about one forward of the model at the case's shapes. Three steps
can cost much more, and say so first when their estimate crosses the live line's thresholds
(:attr:`~harness.core.liveline.LiveLine.announce_s`, :attr:`~harness.core.liveline.LiveLine.announce_bytes`):

- the judge holds the golden's and the case's outputs (2 GB for two copies of 8x512x32000 fp32 logits) and reads
  them in a few chunked passes (no array of its own of the outputs' size: :mod:`harness.judge.orderstats`);
- the diagnosis of a failing case runs the FP32 model and the emulated conversion side by side (the divergence
  profile), then converts and runs up to ``budget`` candidate fixes, each judged;
- the timing (runners that claim a speed) calls each of the two models ``warmup`` times, then for up to
  :attr:`~harness.runners.timing.TimingConfig.budget_s` seconds (``rounds x repeats`` calls when they fit).

The figures come from what the case has measured already: its runner's forward (``Executed.infer_s``), its
conversion and judge seconds, the bytes of its golden's outputs and of the model's weights. The way to shrink every
one of them is a smaller ``--input-shapes`` (the model's dynamic dims halved, when it has any); the diagnosis, which runs
only for failing cases, can be skipped (``--no-diagnose``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from harness.diagnose.facts import DEFAULT_BUDGET
from harness.pipeline.caserun import CaseRun
from harness.runners.timing import TimingConfig, speed_claim

PROFILE_FORWARDS = 2
"""The divergence profile runs the FP32 model and the emulated conversion in one session: about two forwards."""
JUDGE_S_PER_VALUE = 4e-8
"""The judge's seconds per output value (measured: 1.3 s for 34 M logits, full statistics and the logits figures,
on the shared 2-core machine)."""
DIAGNOSE_HOLDS = 3
"""Copies of the outputs the diagnosis holds at once: the golden, and a fix evaluation's outputs with onnxruntime's
own copy of them (the profile holds none: the graph outputs are judged from the case's verdict, and the
side-by-side graph leaves them out)."""


@dataclass(frozen=True)
class Estimate:
    """A step's estimated wall time and peak memory, how they were estimated, and the option that shrinks them."""

    step: str
    seconds: float
    peak_bytes: int
    basis: str
    shrink: str

    def describe(self) -> str:
        return (
            f"{self.step} will take about {self.seconds:.0f} s and {self.peak_bytes / 1e6:.0f} MB ({self.basis}); "
            f"to shrink it: {self.shrink}"
        )


def _largest_output(run: CaseRun) -> int:
    return max((int(np.asarray(a).size) for it in run.context.golden.outputs for a in it.values()), default=0)


def _outputs_bytes(run: CaseRun) -> int:
    return sum(int(np.asarray(a).nbytes) for it in run.context.golden.outputs for a in it.values())


def _weights_bytes(model: onnx.ModelProto) -> int:
    """The initializers' bytes from their declared dims and types (external data is not read)."""
    return sum(
        int(np.prod(t.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        for t in model.graph.initializer
    )


def smaller_shapes(model: onnx.ModelProto, feed: Mapping[str, np.ndarray]) -> str:
    """``--input-shapes`` with the model's dynamic dims halved (its fixed dims cannot change); '' when no input has
    a dynamic dim above 1."""
    dynamic = {
        value.name: {i for i, d in enumerate(value.type.tensor_type.shape.dim) if not d.HasField("dim_value")}
        for value in model.graph.input
    }
    items = []
    for name, array in feed.items():
        shape, axes = np.shape(array), dynamic.get(name, set())
        if any(shape[i] > 1 for i in axes if i < len(shape)):
            dims = (max(1, d // 2) if i in axes else d for i, d in enumerate(shape))
            items.append(f"{name}:{'x'.join(map(str, dims))}")
    return f"--input-shapes {','.join(items)}" if items else ""


def _shrink(run: CaseRun, *, skip: str = "") -> str:
    """The options that shrink or skip a step: smaller dynamic dims (from the golden's feeds), and ``skip``."""
    shapes = smaller_shapes(run.context.model, run.context.golden.feeds[0])
    ways = [f"smaller shapes, e.g. {shapes}" if shapes else "", skip]
    return "; ".join(w for w in ways if w) or "none (the model's input shapes are fixed)"


def judge_estimate(run: CaseRun) -> Estimate | None:
    """The judge's passes over the golden's and the case's outputs, which it holds."""
    if run.executed is None or run.ctx is None:
        return None
    values = sum(int(np.asarray(a).size) for it in run.context.golden.outputs for a in it.values())
    return Estimate(
        step="judging",
        seconds=JUDGE_S_PER_VALUE * values,
        peak_bytes=2 * _outputs_bytes(run),
        basis=f"a few passes over {values} output values, and two copies of the outputs",
        shrink=_shrink(run),
    )


def diagnose_estimate(run: CaseRun, *, budget: int = DEFAULT_BUDGET) -> Estimate | None:
    """The divergence profile (about two forwards) and up to ``budget`` candidate fixes, each converted, run, judged."""
    executed, judged, converted = run.executed, run.judged, run.converted
    if executed is None or judged is None or converted is None or run.ctx is None:
        return None
    forward = executed.infer_s
    fix = converted.seconds + forward + judged.seconds
    return Estimate(
        step="diagnosing",
        seconds=PROFILE_FORWARDS * forward + budget * fix,
        peak_bytes=2 * _weights_bytes(run.context.model) + DIAGNOSE_HOLDS * _outputs_bytes(run),
        basis=f"the profile: {PROFILE_FORWARDS} forwards of {forward:.1f} s; up to {budget} fixes of {fix:.1f} s "
        "each (convert, run, judge)",
        shrink=_shrink(run, skip="skip it: --no-diagnose"),
    )


def time_estimate(run: CaseRun, *, config: TimingConfig) -> Estimate | None:
    """Each model called ``warmup`` times, then timed within the budget (runners that claim a speed; None for the
    others)."""
    if run.executed is None or run.ctx is None or speed_claim(run.point.runner, run.providers):
        return None
    forward = run.executed.infer_s
    timed = config.rounds * config.repeats_for(2 * forward) * 2 * forward
    return Estimate(
        step="timing",
        seconds=2 * config.warmup * forward + timed,
        peak_bytes=2 * _weights_bytes(run.context.model) + 2 * _outputs_bytes(run),
        basis=f"{2 * config.warmup} warm-up calls of about {forward:.2f} s, then {timed:.0f} s of timed calls",
        shrink=_shrink(run),
    )
