"""The sweep report as data: :class:`CaseRecord` per (model, inputs, case) and the :class:`Report`.

Schema version 2 (``report.json``; version 1 is still read: :mod:`harness.report.legacy`). A record is keyed by ``(model, inputs_id, case_id)``; ``case_id`` is
derived from the settings (:class:`harness.sweep.SweepPoint`), so baselines can match cases across runs. Values
that were not measured (a skipped case has no FLOP share) are ``None``. Nothing here decides pass/fail:
``status`` is the outcome the test run recorded; renderers only display it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from harness.data.degenerate import Degenerate
from harness.diagnose.facts import Diagnosis
from harness.diagnose.facts import Divergence as Divergence
from harness.report.figures import OutputStats, Timings
from harness.runners.tensorrt.buildfacts import TrtBuild
from harness.sweep import SweepPoint
from harness.sweep.shards import ShardWork

SCHEMA_VERSION = 2
STATUSES = ("pass", "fail", "xfail", "xpass", "skip", "error")
STOPS = ("", "cannot_run", "unavailable", "error", "golden_not_made", "golden_written", "reused", "not_reached")
"""Where a case stopped (``CaseRecord.stopped``): "" ran to its verdict; the runner cannot run the precision; the
runner is unavailable here; an error; the model's golden could not be made; this case wrote the golden (nothing
compared); an earlier case's result reused; never reached (its test never ran or never handed a record)."""
REUSE_KINDS = ("", "graph", "plan")  # not reused / identical converted graph / identical precision plan


@dataclass(frozen=True)
class CaseRecord:
    """What one sweep case produced. ``outputs_file``/``golden_file`` are paths relative to the report dir."""

    model: str
    model_sha256: str
    case: SweepPoint
    status: str
    runner: str = ""  # the producer string, e.g. "emulate" or "ort[CPUExecutionProvider]"
    rounds_low_precision: bool = False
    inputs_id: str = ""
    message: str = ""
    outputs: tuple[OutputStats, ...] = ()
    lowp_flop_share: float | None = None  # 0..1
    lowp_share_bound: str | None = None  # why lowp_flop_share is only an upper bound (a run-time trip count)
    cast_count: int | None = None
    low_nodes: int | None = None
    high_nodes: int | None = None
    timings: Timings = Timings()
    first_divergent: Divergence | None = None
    outputs_file: str | None = None
    golden_file: str | None = None
    notes: tuple[str, ...] = ()  # e.g. provenance drift of the goldens
    latency_ms: float | None = None  # measured on a GPU runner only (harness.runners.timing)
    fp32_latency_ms: float | None = None  # the FP32 model on the same runner and provider, interleaved
    speedup: float | None = None  # fp32_latency_ms / latency_ms
    speed_note: str = ""  # why no speed was measured (CPU runners claim none)
    speed_basis: str = ""  # how latency_ms/speedup were timed: "device-resident" (IO binding) or "end to end"
    e2e_latency_ms: float | None = None  # end to end: numpy in and out, host copies included (session.run)
    e2e_fp32_latency_ms: float | None = None
    e2e_speedup: float | None = None
    kept_fp32: tuple[
        tuple[str, str], ...
    ] = ()  # (node, why): a tuned case's plan; else what the model's own FP32 Casts hold
    trt_build: TrtBuild | None = None  # the TensorRT build check of the converted model (None: not checked)
    diagnosis: Diagnosis | None = None  # failing cases: the cause and the fix that was run (harness.diagnose)
    # schema 2: facts that schema 1 kept in ``notes`` (display text is rendered from them: report.format.case_notes)
    conversion_cached: bool = False  # the converted model came from the content cache
    reused_from: str | None = None  # the case id whose result this case reuses (converted to the same model)
    reuse_kind: str = ""  # how it matched (REUSE_KINDS): "graph" or "plan"; "" when not reused
    same_plan_as: str | None = None  # ran anyway, though an earlier case (this id) has the same precision plan
    cpu_float_nodes: tuple[str, ...] = ()  # ort-cuda: float nodes ("name (op)") the CUDA EP left to the CPU EP
    trt_build_skipped: str = ""  # why the requested TensorRT build check has no result
    moved_fp32: tuple[str, ...] = ()  # a tuned case whose stored plan missed its bound: nodes the re-tune moves to FP32
    stopped: str = ""  # where the case stopped before its verdict (STOPS); "" when it ran to its record
    degenerate: tuple[Degenerate, ...] = ()  # golden outputs that cannot show an error (all NaN, constant)
    fp32_cast_share: float | None = None  # share of FLOPs the model's own Casts to FP32 keep FP32 (0..1)
    qdq_kept: tuple[str, ...] = ()  # a QDQ model: Q/DQ nodes and the ops between them, kept in their types
    converted_digest: str = ""  # sha256 of the converted graph (pipeline.dedup.model_digest); "": not converted

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"CaseRecord.status must be one of {STATUSES}, got {self.status!r}")
        if self.stopped not in STOPS:
            raise ValueError(f"CaseRecord.stopped must be one of {STOPS}, got {self.stopped!r}")
        if self.lowp_flop_share is not None and not 0.0 <= self.lowp_flop_share <= 1.0:
            raise ValueError(f"CaseRecord.lowp_flop_share must be in [0, 1], got {self.lowp_flop_share!r}")
        if self.reuse_kind not in REUSE_KINDS or (self.reuse_kind == "") != (self.reused_from is None):
            raise ValueError(
                f"CaseRecord.reuse_kind must be one of {REUSE_KINDS[1:]} exactly when reused_from is "
                f"set, got {self.reuse_kind!r} with reused_from={self.reused_from!r}"
            )
        names = [o.name for o in self.outputs]
        if len(set(names)) != len(names):
            raise ValueError(f"CaseRecord.outputs repeats an output name: {names}")

    @property
    def case_id(self) -> str:
        return self.case.id

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity within a report and across runs."""
        return (self.model, self.case_id, self.inputs_id)

    @property
    def worst_max_rel(self) -> float | None:
        """Largest max_rel over the outputs (NaN counts as inf); None when nothing was compared."""
        return _worst(o.max_rel for o in self.outputs)

    @property
    def worst_error(self) -> float | None:
        """Largest :attr:`OutputStats.scaled_error` over the outputs (NaN counts as inf); None if none."""
        return _worst(o.scaled_error for o in self.outputs)


@dataclass(frozen=True)
class Provenance:
    """Where and with what a report was made (see :mod:`harness.report.provenance` to collect it)."""

    castguard: str
    onnx: str
    onnxruntime: str
    numpy: str
    python: str
    platform: str
    hostname: str
    hypothesis_profile: str = "default"
    runners: tuple[str, ...] = ()
    git_commit: str | None = None
    tensorrt: str | None = None
    gpu: str | None = None  # ``nvidia-smi -L`` names, e.g. "1x NVIDIA H100 80GB HBM3"; None: none
    runner_sources: tuple[tuple[str, str, str], ...] = ()  # (runner, distribution, version): castguard.runners
    converter_sources: tuple[tuple[str, str, str], ...] = ()
    """(converter, distribution, version) of each converter the cases used (castguard.converters); a converter that
    wraps a library names it too: ``0.1.0 (onnxruntime 1.32.0)``."""

    def runners_text(self) -> str:
        """``emulate, echo (castguard-echo-runner 0.1.0)``: a plugin runner with the package it came from."""
        sources = {name: (dist, version) for name, dist, version in self.runner_sources}
        return (
            ", ".join(
                name
                if sources.get(name, ("castguard",))[0] == "castguard"
                else f"{name} ({sources[name][0]} {sources[name][1]})"
                for name in self.runners
            )
            or "–"
        )


SHARD_STATES = ("complete", "interrupted", "killed", "failed", "missing")


@dataclass(frozen=True)
class ShardInfo:
    """The part of a sharded sweep a report holds (``pytest --shard K/N``), written when the shard starts.

    ``part`` is the assignment (:class:`harness.sweep.shards.ShardWork`: every model key, the cases per model, and
    this shard's models and cases); ``settings`` and ``goldens`` are what every shard must agree on.
    ``exit_status`` (pytest's) and ``failed_tests`` (failed tests that are not sweep cases, e.g. a golden check)
    are known only once the shard ended: a shard killed mid-run leaves ``exit_status`` None.
    """

    part: ShardWork
    settings: tuple[tuple[str, str], ...] = ()
    goldens: tuple[tuple[str, str], ...] = ()  # (golden .npz relative to the goldens folder, its sha256)
    started: str = ""
    exit_status: int | None = None
    failed_tests: tuple[str, ...] = ()

    @property
    def index(self) -> int:
        return self.part.shard.index

    @property
    def count(self) -> int:
        return self.part.shard.count

    @property
    def text(self) -> str:
        return self.part.shard.text


@dataclass(frozen=True)
class ShardRun:
    """One shard as a merged report saw it (``castguard merge``): where it came from, how it ended, where it ran."""

    index: int
    count: int
    state: str  # one of SHARD_STATES
    folder: str = ""  # the shard folder given to castguard merge ("" when missing)
    run_id: str = ""
    cases: int = 0  # case records it contributed
    assigned: int = 0  # cases it was assigned
    provenance: Provenance | None = None
    note: str = ""  # why it is not complete, or other shards it disagrees with

    def __post_init__(self) -> None:
        if self.state not in SHARD_STATES:
            raise ValueError(f"ShardRun.state must be one of {SHARD_STATES}, got {self.state!r}")


@dataclass(frozen=True)
class Report:
    """Every case of one run, sorted by (model, case_id, inputs_id); build it with :meth:`build`."""

    created: str  # ISO 8601; the only field that varies between identical runs
    provenance: Provenance
    cases: tuple[CaseRecord, ...] = ()
    schema_version: int = SCHEMA_VERSION
    run_id: str = ""  # the run's working folder: runs/<run_id>/ in the report folder
    interrupted: bool = False  # Ctrl-C / a cancelled job: only ``len(cases)`` of ``planned_cases`` ran
    planned_cases: int | None = None  # sweep cases this run selected (None: not known)
    shard: ShardInfo | None = None  # a shard's report (pytest --shard K/N)
    shards: tuple[ShardRun, ...] = ()  # a merged report (castguard merge): every shard of the assignment

    def __post_init__(self) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise ValueError(f"Report.schema_version must be {SCHEMA_VERSION}, got {self.schema_version!r}")
        keys = [c.key for c in self.cases]
        repeated = sorted(k for k, n in Counter(keys).items() if n > 1)
        if repeated:
            raise ValueError(f"Report.cases repeats case(s) {repeated}")
        if keys != sorted(keys):
            raise ValueError("Report.cases must be sorted by (model, case_id, inputs_id); use Report.build()")

    @classmethod
    def build(
        cls,
        cases: Iterable[CaseRecord],
        *,
        created: str,
        provenance: Provenance,
        run_id: str = "",
        interrupted: bool = False,
        planned_cases: int | None = None,
        shard: ShardInfo | None = None,
        shards: tuple[ShardRun, ...] = (),
    ) -> Report:
        return cls(
            created=created,
            provenance=provenance,
            cases=tuple(sorted(cases, key=lambda c: c.key)),
            run_id=run_id,
            interrupted=interrupted,
            planned_cases=planned_cases,
            shard=shard,
            shards=shards,
        )

    @property
    def complete(self) -> bool:
        """Not interrupted: every case the run selected had its chance to run."""
        return not self.interrupted

    @property
    def clean(self) -> bool:
        """Complete, and no case failed or errored (what a nightly baseline must be)."""
        return self.complete and not any(c.status in ("fail", "error", "xpass") for c in self.cases)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.model for c in self.cases))

    def cases_of(self, model: str) -> tuple[CaseRecord, ...]:
        return tuple(c for c in self.cases if c.model == model)

    def counts(self, model: str | None = None) -> dict[str, int]:
        """Cases per status (every status present, zeros included), for one model or all."""
        found = Counter(c.status for c in self.cases if model is None or c.model == model)
        return {status: found[status] for status in STATUSES}


def _worst(values: Iterable[float]) -> float | None:
    return max((math.inf if math.isnan(v) else v for v in values), default=None)
