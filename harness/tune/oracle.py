"""One evaluation of a plan: convert with these nodes kept FP32, run on ``emulate``, measure against FP32.

:class:`Oracle` counts evaluations against the budget, remembers every plan it measured (a plan is the set of
candidate nodes kept FP32), and takes earlier measurements from a memo (the tune cache), which cost no time but count against the budget like a
new evaluation: the budget counts the plans the search needed, so a warm cache, a cold one or one left by a killed
run give the same plan and the same verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from harness.convert import ConversionResult, ConvertOptions, Magnitudes, convert
from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.runners import make_runner
from harness.tune.bound import Bound, Measurement, golden_scales, measure

Outputs = list[dict[str, np.ndarray]]


def exact(name: str) -> str:
    """The ``nodes_to_exclude`` regex matching exactly one node name (re.match anchors the start; ``$`` the end)."""
    return re.escape(name) + "$"


def plan_options(base: ConvertOptions, kept: Iterable[str]) -> ConvertOptions:
    """``base`` with the kept nodes added to ``nodes_to_exclude`` (sorted, so the plan replays byte for byte)."""
    return replace(base, nodes_to_exclude=(*base.nodes_to_exclude, *(exact(n) for n in sorted(kept))))


def plan_key(kept: Iterable[str]) -> str:
    return "\n".join(sorted(kept))


class BudgetExhausted(Exception):
    """The budget of evaluations is spent (internal; the search turns it into a result or a UserError)."""


@dataclass(frozen=True)
class Evaluation:
    kept: frozenset[str]
    measurement: Measurement
    lowp_flop_share: float
    cached: bool = False

    @property
    def passed(self) -> bool:
        return self.measurement.passed

    def to_json(self) -> dict[str, object]:
        m = self.measurement
        return {
            "errors": dict(m.errors),
            "top1": dict(m.top1),
            "policy_failures": list(m.policy_failures),
            "passed": m.passed,
            "ratio": m.ratio,
            "lowp_flop_share": self.lowp_flop_share,
        }

    @classmethod
    def from_json(cls, kept: frozenset[str], doc: Mapping[str, object]) -> Evaluation:
        def pairs(value: object) -> tuple[tuple[str, float], ...]:
            return tuple((str(k), float(v)) for k, v in dict(value).items())  # type: ignore[call-overload]

        measurement = Measurement(
            errors=pairs(doc["errors"]),
            top1=pairs(doc["top1"]),
            policy_failures=tuple(map(str, doc["policy_failures"])),  # type: ignore[call-overload]
            passed=bool(doc["passed"]),
            ratio=float(doc["ratio"]),  # type: ignore[arg-type]
        )
        return cls(
            kept=kept,
            measurement=measurement,
            lowp_flop_share=float(doc["lowp_flop_share"]),  # type: ignore[arg-type]
            cached=True,
        )


@dataclass(frozen=True)
class Setup:
    """Everything one tune holds fixed: the FP32 model, the base options, the data and the bound."""

    model: onnx.ModelProto
    options: ConvertOptions
    magnitudes: Magnitudes
    feeds: list[Feed]
    goldens: Outputs
    bound: Bound
    model_dir: Path | None = None
    use_magnitudes: bool = True
    """False when data_max is inf: ``castguard convert`` then skips the reference run, and so do we."""

    def convert(self, kept: Iterable[str]) -> ConversionResult:
        return convert(
            self.model,
            options=plan_options(self.options, kept),
            magnitudes=self.magnitudes if self.use_magnitudes else None,
            shapes=self.magnitudes.shapes if self.magnitudes is not None else None,  # the reference run's shapes
        )

    def run(self, converted: onnx.ModelProto) -> Outputs:
        feeds = cast_feeds(self.feeds, input_specs(converted))
        return make_runner("emulate", converted, model_dir=self.model_dir).run(feeds).outputs


def fp32_outputs(model: onnx.ModelProto, feeds: Sequence[Feed], *, model_dir: Path | None) -> Outputs:
    """The goldens: ORT CPU on the FP32 model."""
    return make_runner("ort", model, model_dir=model_dir).run(feeds).outputs


class Oracle:
    """Measures plans; see the module docstring. ``on_eval`` hears about every new (not memoized) evaluation."""

    def __init__(
        self,
        setup: Setup,
        *,
        budget: int,
        memo: dict[str, dict[str, object]] | None = None,
        on_eval: Callable[[Evaluation, int], None] | None = None,
    ) -> None:
        self.setup, self.budget = setup, budget
        self.memo = memo if memo is not None else {}
        self.on_eval = on_eval
        self.spent = 0
        self.reused = 0
        self.seen: dict[str, Evaluation] = {}
        self._golden_scales: dict[str, float] | None = None

    def _scales(self) -> dict[str, float] | None:
        """The goldens' scales, measured once for every plan; only where the policy's comparison lets them be used."""
        if not self.setup.bound.use_policy:
            return None
        if self._golden_scales is None:
            self._golden_scales = golden_scales(self.setup.goldens)
        return self._golden_scales

    def evaluate(self, kept: Iterable[str]) -> Evaluation:
        plan = frozenset(kept)
        key = plan_key(plan)
        if key in self.seen:
            return self.seen[key]
        if self.spent + self.reused >= self.budget:  # a cached plan counts too: warm or cold, one verdict
            raise BudgetExhausted
        if key in self.memo:
            self.reused += 1
            result = Evaluation.from_json(plan, self.memo[key])
        else:
            self.spent += 1
            conversion = self.setup.convert(plan)
            outputs = self.setup.run(conversion.model)
            result = Evaluation(
                kept=plan,
                measurement=measure(outputs, self.setup.goldens, self.setup.bound, scales=self._scales()),
                lowp_flop_share=conversion.lowp_flop_share,
            )
            self.memo[key] = result.to_json()
            if self.on_eval is not None:
                self.on_eval(result, self.spent)
        self.seen[key] = result
        return result
