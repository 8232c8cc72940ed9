"""Counterexample-guided tuning: search, hunt for an input over the bound, add it to the tuning set, search again.

A round searches the plan on the tuning inputs (:func:`harness.tune.search.search` on a fresh
:class:`~harness.tune.oracle.Oracle`: a new input changes every measurement) and then hunts for a counterexample
(:func:`harness.tune.stress.stress`). A counterexample joins the tuning inputs, with its FP32 golden, and the
next round searches again, for at most ``TuneSettings.rounds`` extra rounds and within the one budget of
evaluations. When no plan meets the bound on a counterexample (even every candidate FP32 misses it: the graph's
low-precision inputs/outputs already cost that much) or the budget runs out in a later round, the rounds stop with
the previous round's plan, which that counterexample breaks. The final plan *holds* when the last hunt found nothing: it then meets the bound on every tuning
input and on every counterexample found. Otherwise (rounds or budget spent) it does not, and the caller says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from harness.convert import ConversionResult
from harness.core.dtypes import LOW_MAX
from harness.core.errors import UserError
from harness.data.feeds import Feed
from harness.tune.memo import TuneCache, TuneMemo, tune_key
from harness.tune.oracle import Evaluation, Oracle, Setup, fp32_outputs
from harness.tune.probe import Sensitivity, measure_sensitivity, rank
from harness.tune.search import SearchResult, search
from harness.tune.stress import StressOutcome, StressTarget, stress

Progress = Callable[[Evaluation, int, "Evaluation | None"], None]
_INLINE_VALUES = 1024  # a counterexample this small is stored in plan.json value by value


@dataclass(frozen=True)
class Counterexample:
    round: int  # the round whose plan it broke (1-based)
    found_by: str
    error_over_bound: float
    feed: Feed

    def to_json(self) -> dict[str, object]:
        return {
            "round": self.round,
            "found_by": self.found_by,
            "error_over_bound": self.error_over_bound,
            "inputs": {name: describe_array(value) for name, value in self.feed.items()},
        }


def describe_array(value: np.ndarray) -> dict[str, object]:
    """Small arrays value by value; larger ones by shape, dtype, sha256 of the bytes and their range."""
    array = np.ascontiguousarray(value)
    doc: dict[str, object] = {
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "sha256": hashlib.sha256(array.tobytes()).hexdigest(),
    }
    if array.size <= _INLINE_VALUES:
        doc["values"] = np.asarray(array, dtype=np.float64 if array.dtype.kind == "f" else np.int64).ravel().tolist()
    elif array.size:
        wide = np.asarray(array, dtype=np.float64)
        doc["min"], doc["max"] = float(wide.min()), float(wide.max())
    return doc


@dataclass(frozen=True)
class Round:
    inputs: int  # tuning inputs this round searched on
    kept: tuple[str, ...]
    evaluations: int
    stress: StressOutcome | None

    def to_json(self) -> dict[str, object]:
        return {
            "inputs": self.inputs,
            "kept_fp32": sorted(self.kept),
            "evaluations": self.evaluations,
            "adversarial": self.stress.to_json() if self.stress is not None else {"examples": 0},
        }


@dataclass(frozen=True)
class Rounds:
    setup: Setup  # the last round's (tuning inputs + counterexamples)
    oracle: Oracle  # the last round's
    result: SearchResult
    final: ConversionResult
    rounds: tuple[Round, ...]
    spent: int
    reused: int
    sensitivity: Sensitivity | None
    stopped: str = ""
    """Why the rounds ended early: a counterexample no plan meets the bound on (unreachable), or the budget."""

    @property
    def stress(self) -> StressOutcome | None:
        return self.rounds[-1].stress

    @property
    def counterexamples(self) -> tuple[Counterexample, ...]:
        """The inputs over the bound the hunts found, each with the round whose plan it broke (read from the
        rounds' hunts, where they are recorded)."""
        return tuple(
            Counterexample(
                number, r.stress.found_by, r.stress.failing_ratio or r.stress.worst_ratio, r.stress.failing_feed
            )
            for number, r in enumerate(self.rounds, start=1)
            if r.stress is not None and r.stress.failing_feed is not None
        )

    @property
    def holds(self) -> bool:
        """No hunt was made (``stress_examples`` 0), or the last one found no input over the bound."""
        return self.stress is None or self.stress.failing_feed is None


def with_input(setup: Setup, feed: Feed) -> Setup:
    """``setup`` with one more tuning input and its FP32 golden."""
    gold = fp32_outputs(setup.model, [feed], model_dir=setup.model_dir)
    return replace(setup, feeds=[*setup.feeds, feed], goldens=[*setup.goldens, *gold])


@dataclass(frozen=True)
class RoundsPlan:
    """What the rounds search with: the model's content hash (the tune cache's key), the evaluations they may spend
    in all, the extra rounds after the first, the hunt's examples per round (0: no hunt) and its first seed, and the
    tune cache (None: none)."""

    sha256: str
    budget: int
    extra_rounds: int
    stress_examples: int
    seed: int
    cache: TuneCache | None


def search_rounds(
    setup: Setup, candidates: Sequence[str], plan: RoundsPlan, *, progress: Progress | None = None
) -> Rounds:
    """See the module docstring. UserError (from the search) for an unreachable bound or a spent budget."""
    rounds: list[Round] = []
    spent = reused = 0
    current = previous = setup
    stopped = ""
    while True:
        try:
            oracle, result, memo = _one_search(
                current,
                candidates,
                plan,
                budget=plan.budget - spent - reused,  # cached evaluations count: the same verdict warm or cold
                on_eval=_reporter(progress, spent_before=spent),
            )
        except UserError as err:
            if not rounds:
                raise  # no plan at all: the caller's error (unreachable, budget)
            stopped = f"round {len(rounds) + 1} with the counterexample found no plan: {err.problem}"
            current = previous
            break
        spent, reused = spent + oracle.spent, reused + oracle.reused
        final = current.convert(result.best.kept)
        hunt = None
        if plan.stress_examples:
            target = StressTarget(
                model=current.model,
                tuned=final.model,
                bound=current.bound,
                calibration=current.feeds,
                model_dir=current.model_dir,
                low_nodes=final.low_nodes,
                limit=LOW_MAX[current.options.low_elem],
            )
            hunt = stress(target, examples=plan.stress_examples, seed=plan.seed + len(rounds))
        rounds.append(
            Round(
                inputs=len(current.feeds),
                kept=tuple(sorted(result.best.kept)),
                evaluations=oracle.spent + oracle.reused,  # the plans this round needed, cached or not
                stress=hunt,
            )
        )
        if (
            hunt is None
            or hunt.failing_feed is None
            or len(rounds) > plan.extra_rounds
            or plan.budget - spent - reused < 2
        ):
            break
        previous, current = current, with_input(current, hunt.failing_feed)
    return Rounds(
        setup=current,
        oracle=oracle,
        result=result,
        final=final,
        rounds=tuple(rounds),
        spent=spent,
        reused=reused,
        sensitivity=memo.sensitivity,
        stopped=stopped,
    )


def _reporter(progress: Progress | None, *, spent_before: int) -> Callable[[Evaluation, int], None]:
    """The oracle's listener for one round's search: passes each evaluation to ``progress`` with the evaluations
    spent in all and the best passing plan of this round so far."""
    best: list[Evaluation] = []

    def heard(evaluation: Evaluation, spent: int) -> None:
        if evaluation.passed and (not best or len(evaluation.kept) < len(best[0].kept)):
            best[:] = [evaluation]
        if progress is not None:
            progress(evaluation, spent_before + spent, best[0] if best else None)

    return heard


def _one_search(
    setup: Setup,
    candidates: Sequence[str],
    plan: RoundsPlan,
    *,
    budget: int,
    on_eval: Callable[[Evaluation, int], None],
) -> tuple[Oracle, SearchResult, TuneMemo]:
    key = tune_key(model_sha256=plan.sha256, options=setup.options, feeds=setup.feeds, bound=setup.bound)
    cache = plan.cache
    memo = cache.load(key) if cache is not None else TuneMemo()

    def ranking() -> list[str]:
        if memo.sensitivity is None or set(memo.sensitivity.local) != set(candidates):
            memo.sensitivity = measure_sensitivity(
                setup.model,
                options=setup.options,
                magnitudes=setup.magnitudes,
                candidates=list(candidates),
                feeds=setup.feeds,
            )
        return rank(list(candidates), memo.sensitivity)

    oracle = Oracle(setup, budget=budget, memo=memo.evaluations, on_eval=on_eval)
    try:
        result = search(oracle, candidates, ranking)
    finally:
        if cache is not None:
            cache.store(key, memo)
    return oracle, result, memo
