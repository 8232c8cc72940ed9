"""The search algorithm on a synthetic oracle: a plan passes when it keeps every node of a hidden set FP32.

Checks the evaluation bound of the issue (<= 2 (K + 1) log2 C + 10), that the result is minimal, that a
ranking that hides the needed nodes at the end still finds them, and that a spent budget keeps the best
passing plan (no silent fallback to an unverified one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from harness.convert import ConvertOptions
from harness.core.errors import UserError
from harness.tune.bound import Bound, Measurement
from harness.tune.oracle import BudgetExhausted, Evaluation
from harness.tune.search import Unreachable, search


@dataclass
class _Setup:
    bound: Bound = Bound()
    options: ConvertOptions = ConvertOptions()


class FakeOracle:
    def __init__(self, needed: set[str], *, budget: int = 10_000, reachable: bool = True) -> None:
        self.needed, self.budget, self.reachable = needed, budget, reachable
        self.spent = 0
        self.setup = _Setup()
        self.seen: dict[frozenset[str], Evaluation] = {}

    def evaluate(self, kept: Iterable[str]) -> Evaluation:
        plan = frozenset(kept)
        if plan in self.seen:
            return self.seen[plan]
        if self.spent >= self.budget:
            raise BudgetExhausted
        self.spent += 1
        missing = len(self.needed - plan)
        ok = missing == 0 and self.reachable
        error = 5e-4 if ok else 1e-3 * (1 + missing)
        result = Evaluation(
            kept=plan,
            measurement=Measurement(errors=(("y", error),), passed=ok, ratio=error / 1e-3),
            lowp_flop_share=1 - len(plan) / 1000,
        )
        self.seen[plan] = result
        return result


NODES = [f"n{i}" for i in range(200)]


@pytest.mark.parametrize("needed", [set(), {"n7"}, {"n3", "n150"}, {f"n{i}" for i in range(0, 200, 25)}])
@pytest.mark.parametrize("order", ["good", "reversed"])
def test_finds_the_minimal_set_within_the_bound(needed: set[str], order: str) -> None:
    ranked = (
        sorted(NODES, key=lambda n: (n not in needed, n))
        if order == "good"
        else sorted(NODES, key=lambda n: (n in needed, n))
    )
    oracle = FakeOracle(needed)
    result = search(oracle, NODES, lambda: ranked)  # type: ignore[arg-type]
    assert result.best.kept == frozenset(needed) and result.complete
    k, c = len(needed), len(NODES)
    assert oracle.spent <= 2 * (k + 1) * math.log2(c) + 10, oracle.spent


def test_segment_halving_would_spend_more() -> None:
    """onnxconverter-common's algorithm on the same oracle, for the record of the comparison in bench_tune."""
    needed = {"n3", "n77", "n150"}
    oracle = FakeOracle(needed)
    search(oracle, NODES, lambda: sorted(NODES, key=lambda n: (n not in needed, n)))  # type: ignore[arg-type]
    segments, good, count = [NODES], [], 0
    while segments:
        segment = max(segments, key=len)
        segments.remove(segment)
        count += 1
        if not needed & set(segment):
            good.append(segment)
        elif len(segment) > 1:
            segments += [segment[: len(segment) // 2], segment[len(segment) // 2 :]]
    assert oracle.spent < count


def test_unreachable_and_spent_budget_are_user_errors() -> None:
    with pytest.raises(Unreachable, match="unreachable"):
        search(FakeOracle({"n1"}, reachable=False), NODES, lambda: NODES)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="budget of 1"):
        search(FakeOracle({"n1"}, budget=1), NODES, lambda: NODES)  # type: ignore[arg-type]


def test_spent_budget_keeps_a_verified_passing_plan() -> None:
    needed = {f"n{i}" for i in range(0, 200, 10)}
    oracle = FakeOracle(needed, budget=12)
    result = search(oracle, NODES, lambda: list(reversed(NODES)))  # type: ignore[arg-type]
    assert not result.complete
    assert result.best.passed and needed <= result.best.kept
