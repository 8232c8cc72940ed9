"""The runner interface every backend shares (Polygraphy style: the base class owns the lifecycle checks).

Usage::

    with make_runner("emulate", model) as runner:
        outputs = runner.infer(feed)
    result = make_runner("ort", model).run(feeds)      # activates and deactivates around the feeds

Subclasses implement ``activate_impl`` / ``infer_impl`` / ``deactivate_impl`` only. ``infer`` validates the
feed against the model's declared inputs (names, dtypes, ranks, static dims) before calling ``infer_impl``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
import onnx

from harness.core.errors import RunnerError
from harness.data.feeds import Feed, input_specs, validate_feeds


@dataclass(frozen=True)
class RunResult:
    """Outputs of one runner over a list of feeds, and who produced them."""

    outputs: list[dict[str, np.ndarray]]
    runner: str
    rounds_low_precision: bool
    seconds: float


RunnerOptions = Mapping[str, "str | int | float | bool"]
"""A runner's options (``--runner-option NAME:key=value``, ``runner_options=`` in the fixture, ``[tool.castguard]
runner_options``): keys and values as the user wrote them."""


class Runner:
    """Base class: ``activate`` -> ``infer`` (any number of times) -> ``deactivate``; also a context manager.

    ``name`` identifies the producer in results and reports (e.g. ``ort[CPUExecutionProvider]``);
    ``rounds_low_precision`` is True only for runners whose fp16/bf16 tensors really hold fp16/bf16 values.
    Both default to the class attributes of the same name, so a plugin subclass that declares them needs no
    ``__init__`` of its own. ``options`` are the user's runner options, kept as ``self.runner_options`` (empty when none were given).
    """

    name: str
    rounds_low_precision: bool

    def __init__(
        self,
        model: onnx.ModelProto,
        *,
        name: str | None = None,
        rounds_low_precision: bool | None = None,
        model_dir: Path | None = None,
        options: RunnerOptions | None = None,
    ) -> None:
        self.model = model
        self.name = name if name is not None else str(getattr(type(self), "name", type(self).__name__))
        declared = getattr(type(self), "rounds_low_precision", None)
        if rounds_low_precision is None and not isinstance(declared, bool):
            raise RunnerError(
                f"{self.name}: declare rounds_low_precision = True or False on the class (or pass it to __init__)"
            )
        self.rounds_low_precision = rounds_low_precision if rounds_low_precision is not None else bool(declared)
        self.model_dir = model_dir
        self.runner_options: dict[str, str | int | float | bool] = dict(options or {})
        self.is_active = False
        self._inputs = input_specs(model)

    @classmethod
    def prepare(cls) -> None:
        """Start-up work the runner can begin before its first case, in the background (a run calls it once per
        runner it plans, after planning; ``ort-cuda`` starts its CUDA check's child process). Default: none."""

    def activate(self) -> None:
        if self.is_active:
            raise RunnerError(f"{self.name}: activate() called twice")
        self.activate_impl()
        self.is_active = True

    def infer(self, feed: Feed) -> dict[str, np.ndarray]:
        if not self.is_active:
            raise RunnerError(f"{self.name}: call activate() (or use `with runner:`) before infer()")
        checked = validate_feeds([feed], self._inputs, where=f"feed for runner {self.name}")[0]
        return self.infer_impl(checked)

    def deactivate(self) -> None:
        if not self.is_active:
            raise RunnerError(f"{self.name}: deactivate() without activate()")
        self.is_active = False
        self.deactivate_impl()

    def __enter__(self) -> Runner:
        self.activate()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.deactivate()

    def run(self, feeds: Sequence[Feed]) -> RunResult:
        """Infer every feed (activating around them if needed); time covers inference only."""
        if not self.is_active:
            with self:
                return self.run(feeds)
        start = time.perf_counter()
        outputs = [self.infer(feed) for feed in feeds]
        return RunResult(
            outputs=outputs,
            runner=self.name,
            rounds_low_precision=self.rounds_low_precision,
            seconds=time.perf_counter() - start,
        )

    def device_call(self, feed: Feed) -> Callable[[], object] | None:
        """A call that runs ``feed`` with its inputs already on the model's device (bound once, here) and its outputs
        left there: what a deployed model costs, without the host copies. None: this runner has no such call (the
        speed step then times :meth:`infer_impl`, copies included, and says so). Call on an active runner."""
        return None

    def activate_impl(self) -> None:
        raise NotImplementedError

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def deactivate_impl(self) -> None:
        raise NotImplementedError

    def profile_placement(self, feed: Feed) -> list[str]:
        """The float compute nodes this runner left on the CPU for ``feed`` (a runner whose traits declare
        ``reports_cpu_placement`` implements it)."""
        raise NotImplementedError(f"{self.name} does not report CPU placement (traits.reports_cpu_placement)")
