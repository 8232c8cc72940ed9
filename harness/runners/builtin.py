"""castguard's own runners as :class:`~harness.runners.registry.RunnerPlugin` objects, registered in its
``pyproject.toml`` under ``castguard.runners`` like any third-party runner. Each backend module is imported only
when its runner is built, so a missing optional library (tensorrt) costs nothing unless its runner is used."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from harness.core.errors import RunnerUnavailable, UserError
from harness.core.providers import CUDA
from harness.runners.base import Runner
from harness.runners.traits import RunnerTraits, SpeedClaim


@dataclass(frozen=True)
class Builtin:
    """A lazily imported built-in runner class (``module:cls``)."""

    module: str
    cls: str
    rounds_low_precision: bool
    precisions: tuple[str, ...] = ("fp16", "bf16")
    traits: RunnerTraits = RunnerTraits()
    isolated: bool = False  # castguard's own runners run in its process (their native code is onnxruntime's)

    def __call__(
        self,
        model: onnx.ModelProto,
        *,
        model_dir: Path | None = None,
        providers: Sequence[str] = (),
        options: Mapping[str, object] | None = None,
    ) -> Runner:
        if options:
            raise UserError(
                where="--runner-option",
                problem=f"castguard's own runner {self.module} takes no runner options (given: {', '.join(options)})",
                fix="drop the option: runner options are for runner plugins",
            )
        try:
            module = importlib.import_module(self.module)
        except ModuleNotFoundError as err:
            if err.name != self.module:
                raise
            raise RunnerUnavailable(f"{self.module} is not part of this install") from err
        factory = getattr(module, self.cls)
        extra = {"providers": tuple(providers)} if providers else {}
        runner: Runner = factory(model, model_dir=model_dir, **extra)
        return runner

    def prepare(self) -> None:
        """The runner class's start-up work (:meth:`Runner.prepare`); none where its module does not import (the
        case says why when it builds the runner)."""
        try:
            module = importlib.import_module(self.module)
        except ImportError:
            return
        getattr(module, self.cls).prepare()


ALWAYS = SpeedClaim(when="always")
# ORT CPU computes fp16 in fp32 (rounds_low_precision False); with CUDA providers it rounds (the runner says so)
ort = Builtin(
    "harness.runners.ort",
    "OrtRunner",
    rounds_low_precision=False,
    traits=RunnerTraits(
        speed=SpeedClaim(
            when="gpu_providers",
            why_not="ORT's CPU provider computes fp16 in fp32 (and has few bf16 kernels): its time says nothing "
            "about low-precision speed on a GPU",
        ),
        takes_providers=True,
        cpu_precisions=("fp16",),
    ),
)
ort_cuda = Builtin(
    "harness.runners.ort_cuda",
    "OrtCudaRunner",
    rounds_low_precision=True,
    traits=RunnerTraits(speed=ALWAYS, reports_cpu_placement=True, device_providers=(CUDA,)),
)
emulate = Builtin(
    "harness.runners.emulate",
    "EmulateRunner",
    rounds_low_precision=True,
    traits=RunnerTraits(
        computes_exact_plan=True,
        speed=SpeedClaim(
            why_not="emulate computes in fp32 with Cast pairs on the CPU: its time says nothing about fp16/bf16 speed"
        ),
    ),
)
reference = Builtin(
    "harness.runners.reference",
    "ReferenceRunner",
    rounds_low_precision=True,
    traits=RunnerTraits(computes_exact_plan=True),
)
trt = Builtin(
    "harness.runners.tensorrt.runner",
    "TrtRunner",
    rounds_low_precision=True,
    traits=RunnerTraits(speed=ALWAYS, deploys_to="tensorrt"),
)
