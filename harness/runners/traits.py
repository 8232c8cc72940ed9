"""What a runner declares about itself, so the case pipeline never asks for its name (:class:`RunnerTraits`).

A runner plugin (:class:`~harness.runners.registry.RunnerPlugin`) may carry ``traits = RunnerTraits(...)``; one that
does not gets the defaults (no reuse by plan, no speed claim, no providers, no deployment target). castguard's own
runners declare theirs in :mod:`harness.runners.builtin` the same way, so a plugin that declares a trait gets
exactly what a built-in gets:

* ``computes_exact_plan``: its values are decided by the precision plan alone (every low-precision tensor rounded
  as planned), so a case with the same plan as an earlier one reuses that result (``reuse_kind="plan"``);
* ``speed``: whether it measures real low-precision speed (:class:`SpeedClaim`: always, only on a GPU provider, or
  never, with the reason said instead of a number) and how the case is timed;
* ``takes_providers``: it takes the run's ORT execution providers (``--ort-providers``); ``cpu_precisions``: the
  low types it can run when the first provider is the CPU one;
* ``deploys_to``: the deployment target it stands for (``"tensorrt"``: a model that does not build there fails);
* ``reports_cpu_placement``: its runner's ``profile_placement(feed)`` names the float nodes left on the CPU;
* ``device_providers``: the ORT providers of the device it runs on (``ort-cuda``: CUDA), where castguard's own ORT
  work for its cases runs too (:meth:`RunnerTraits.work_providers`: the diagnosis's side-by-side comparison).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness.core.providers import CPU, CUDA, DIRECTML, MIGRAPHX, ROCM, TENSORRT

GPU_PROVIDERS = (CUDA, TENSORRT, ROCM, MIGRAPHX, DIRECTML)
TIMED = (
    "the runner's inference on the first golden feed, host copies included, interleaved with the FP32 model on "
    "the same runner"
)


@dataclass(frozen=True)
class SpeedClaim:
    """When a runner's timings say something about low-precision speed (``when``), why not otherwise, and how a
    case is timed (``timed``, said in the docs and the report)."""

    when: Literal["always", "gpu_providers", "never"] = "never"
    why_not: str = ""
    timed: str = TIMED

    def note(self, runner: str, providers: Sequence[str] = ()) -> str:
        """'' when this runner claims a speed with these providers, else the reason it claims none."""
        if self.when == "always" or (self.when == "gpu_providers" and providers and providers[0] in GPU_PROVIDERS):
            return ""
        return self.why_not or f"{runner} does not run on low-precision hardware: no speed is claimed"


@dataclass(frozen=True)
class RunnerTraits:
    """A runner's declared traits; see the module docstring."""

    computes_exact_plan: bool = False
    speed: SpeedClaim = SpeedClaim()
    takes_providers: bool = False
    cpu_precisions: tuple[str, ...] = ("fp16", "bf16")
    deploys_to: str = ""
    reports_cpu_placement: bool = False
    device_providers: tuple[str, ...] = ()

    def work_providers(self, providers: Sequence[str]) -> tuple[str, ...]:
        """Where castguard's own ORT work for a case on this runner runs (the diagnosis's comparison graph): the
        runner's device (its ``device_providers``, or a CUDA provider it was given) first, then the CPU for any
        node that device has no kernel for."""
        given = tuple(providers[:1]) if self.takes_providers and providers and providers[0] == CUDA else ()
        return tuple(dict.fromkeys((*(self.device_providers or given), CPU)))

    def cannot_run(self, runner: str, precision: str, providers: Sequence[str]) -> str | None:
        """Why the runner cannot run a ``precision`` model with these providers (checked before converting)."""
        on_cpu = self.takes_providers and (not providers or providers[0] == CPU)
        if on_cpu and precision not in self.cpu_precisions:
            return (
                f"{runner}[{CPU}] has no {precision} kernels, so a {precision} model cannot run on it; use a runner "
                f"that rounds {precision} on the CPU (--runner emulate), or --ort-providers CUDAExecutionProvider on "
                "a GPU"
            )
        return None
