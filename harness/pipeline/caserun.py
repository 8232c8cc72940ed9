"""One case as one frozen value, :class:`CaseRun`, and what the steps that extend it share. No pytest.

A case starts as a :class:`CaseRun` holding its model's facts, its sweep point and its runner's declared
:class:`~harness.runners.traits.RunnerTraits`; each step (:mod:`harness.pipeline.steps`) has the one shape
``step(run, env) -> run`` and fills its own field with its own small frozen result (and the seconds it took),
or sets :attr:`CaseRun.stop` (where and why the case stopped: :class:`Stop`). The verdict is decided from the
finished value in one place (:func:`harness.pipeline.verdict.decide`) and the record is built from it in one
place (:func:`harness.pipeline.steps.record.record`). A new step is one function and one field here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.convert import ConversionResult
from harness.core.background import PendingWrite
from harness.data.feeds import Feed
from harness.diagnose import Diagnosis
from harness.judge.compare import CompareResult
from harness.pipeline.cache import ContentCache
from harness.pipeline.context import CaseSettings, ModelContext
from harness.pipeline.dedup import SameModels
from harness.pipeline.speed import Speed
from harness.report import CaseRecord
from harness.runners.tensorrt.buildfacts import TrtBuild
from harness.runners.traits import RunnerTraits
from harness.sweep import SweepPoint

StopKind = Literal["cannot_run", "unavailable", "error", "golden_not_made", "golden_written", "reused", "not_reached"]


@dataclass(frozen=True)
class Stop:
    """Where a case stopped before its verdict (one of :data:`harness.report.model.STOPS`) and why."""

    kind: StopKind
    message: str = ""


@dataclass(frozen=True)
class Converted:
    """The case's conversion, whether it came from the content cache, and the seconds it took."""

    conversion: ConversionResult
    cached: bool
    seconds: float

    def model_dir(self, ctx: ModelContext) -> Path:
        """Where the converted model's external weights are (the original model's folder by default)."""
        return self.conversion.base_dir or ctx.spec.path.parent


@dataclass(frozen=True)
class BuildChecked:
    """The TensorRT build check of the converted model: its result, or why there is none ("" when not asked)."""

    build: TrtBuild | None = None
    skipped: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Duplicate:
    """This case's keys in :class:`SameModels`, and what they found: a record to reuse (and how it matched:
    ``"graph"`` or ``"plan"``), or else the first case with the same precision plan (it runs anyway)."""

    graph: tuple[str, ...]
    plan: tuple[str, ...]
    first: CaseRecord | None = None
    kind: str = ""
    same_plan_as: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Executed:
    """The converted model's outputs on the golden's feeds, who produced them, and where the time went:
    ``setup_s`` (the runner's session and the feeds) and ``infer_s`` (inference)."""

    outputs: list[Feed]
    runner: str
    rounds_low_precision: bool
    cpu_float_nodes: tuple[str, ...] = ()  # float nodes the runner left to the CPU (traits.reports_cpu_placement)
    setup_s: float = 0.0
    infer_s: float = 0.0


@dataclass(frozen=True)
class Judged:
    """The comparison of the outputs with the golden (the verdict is :func:`~harness.pipeline.verdict.decide`'s)."""

    comparison: CompareResult
    seconds: float = 0.0


@dataclass(frozen=True)
class Diagnosed:
    """A failing case's diagnosis (its cause: None when no tensor beyond tolerance reaches the outputs) and
    message; ``diagnosis`` None: skipped by ``--no-diagnose`` (the message says so)."""

    diagnosis: Diagnosis | None
    message: str
    seconds: float = 0.0


@dataclass(frozen=True)
class Timed:
    """The case's measured speed (or why none is claimed) and the seconds spent measuring."""

    speed: Speed
    seconds: float = 0.0


@dataclass(frozen=True)
class Tuned:
    """The tune step's result (:mod:`harness.pipeline.tuned`): the tuned plan's conversion, the nodes it keeps FP32
    (node, why), those the re-tune moves to FP32, whether the plan meets its bound, and its notes."""

    conversion: ConversionResult
    kept_fp32: tuple[tuple[str, str], ...]
    meets_bound: bool
    message: str = ""
    notes: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()  # nodes the re-tuned plan moves to FP32 (a stored plan that stopped meeting it)
    seconds: float = 0.0  # the tune (or the stored plan's check), with the golden and the model's context


@dataclass(frozen=True)
class Saved:
    """Where the case's outputs are saved in the report folder (relative path) and the seconds it took; ``pending``:
    the write, while it is under way (:func:`harness.pipeline.steps.record.settle_save` waits for it)."""

    outputs_file: str
    seconds: float = 0.0
    pending: PendingWrite | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CaseEnv:
    """What the steps share across cases: the run-wide settings, the content cache, and the memory of converted
    models already run (None: every case runs)."""

    settings: CaseSettings
    cache: ContentCache
    same: SameModels | None = None


@dataclass(frozen=True)
class CaseRun:
    """One case; see the module docstring. ``ctx`` is None only for a case that stopped before its model's
    context existed (no golden)."""

    model: str
    model_sha256: str
    inputs_id: str
    point: SweepPoint
    traits: RunnerTraits
    providers: tuple[str, ...] = ()  # the ORT providers its runner takes (traits.takes_providers), else none
    started: float = field(default_factory=time.perf_counter)
    notes: tuple[str, ...] = ()
    ctx: ModelContext | None = None
    magnitudes_s: float = 0.0
    stop: Stop | None = None
    converted: Converted | None = None
    built: BuildChecked = BuildChecked()
    duplicate: Duplicate | None = None
    executed: Executed | None = None
    judged: Judged | None = None
    diagnosed: Diagnosed | None = None
    timed: Timed | None = None
    tuned: Tuned | None = None
    saved: Saved | None = None

    @property
    def context(self) -> ModelContext:
        """The model's context (steps after the golden may rely on it)."""
        assert self.ctx is not None, "a step after the golden runs with the model's context"
        return self.ctx
