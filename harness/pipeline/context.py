"""What a case runs with: the model's shared :class:`ModelContext` and the run-wide :class:`CaseSettings`. No pytest.

Work shared by every case of a model (its golden, its magnitudes) arrives in a :class:`ModelContext`, built once
per process by :class:`harness.pipeline.session.AccuracySession`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import onnx

from harness.convert import Magnitudes
from harness.core.liveline import LiveLine
from harness.data.degenerate import Degenerate
from harness.data.goldens import Golden
from harness.data.models import ModelSpec
from harness.judge.tolerances import TolerancePolicy
from harness.runners.options import RunnerOptionsTable
from harness.runners.ort import CPU
from harness.runners.timing import TimingConfig


@dataclass(frozen=True)
class ModelContext:
    """What every case of one model shares: the model, its golden and its magnitudes on the golden's feeds."""

    spec: ModelSpec
    model: onnx.ModelProto
    golden: Golden
    golden_path: Path
    golden_file: str  # the golden's copy in the report folder (relative path)
    inputs_id: str
    magnitudes: Magnitudes
    magnitudes_key: str
    magnitudes_s: float  # seconds this process spent collecting them (0.0 on a cache hit)
    degenerate: tuple[Degenerate, ...] = ()  # golden outputs no error can show in (all NaN, constant): every record


FIXES_DIR = "fixes"  # under the report folder, beside runs/: keep_runs pruning never touches it


@dataclass(frozen=True)
class CaseSettings:
    """The run-wide settings a case needs."""

    tolerances: TolerancePolicy = TolerancePolicy()
    ort_providers: tuple[str, ...] = (CPU,)
    report_dir: Path = Path("castguard-report")
    fixes_dir: Path = Path("castguard-report") / FIXES_DIR  # printed fix/tune commands' files (never pruned)
    timing: TimingConfig = TimingConfig()
    trt_build_check: bool = False  # build every converted model with TensorRT (harness.pipeline.build_check)
    diagnose: bool = True  # diagnose failing cases on rounding runners (--no-diagnose: skip, say so in the message)
    runner_options: RunnerOptionsTable = ()  # --runner-option NAME:key=value, per runner plugin
    runner_timeout: float | None = None  # a plugin's child process; None: fitted to the model (runners/isolated.py)
    live: LiveLine | None = None  # a live line while a long step runs (None: silent, as under -q)

    def step(self, label: str, step: str) -> AbstractContextManager[None]:
        """Around one step of a case: :meth:`LiveLine.step`, or nothing."""
        return nullcontext() if self.live is None else self.live.step(label, step)
