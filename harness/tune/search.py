"""The search for the fewest FP32 nodes that meet the bound, on the :class:`~harness.tune.oracle.Oracle`.

Candidates arrive ranked (most sensitive per FLOP first, :func:`harness.tune.probe.rank`). Then:

1. all candidates low: done if it passes (1 evaluation);
2. all candidates FP32: if even that fails, the bound is unreachable (1 evaluation);
3. binary search for the shortest prefix of the ranking that passes when kept FP32 (log2 C evaluations);
4. extraction: the last node of that prefix is needed; keep it, binary-search the shortest prefix of the rest
   that still passes with it, take that prefix's last node, and so on until the kept nodes alone pass
   (1 + log2 p evaluations per kept node: adaptive group testing);
5. pruning: try each kept node back in low precision, least sensitive first (1 evaluation per kept node).

Every step keeps a plan that is known to pass, so the result is verified on all calibration inputs even when
the failures are not monotone in the ranking, and a spent budget still returns the best passing plan found.
For K kept nodes of C candidates that is at most ``2 + log2 C + K (2 + log2 C)`` evaluations.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.errors import UserError
from harness.tune.oracle import BudgetExhausted, Evaluation, Oracle


@dataclass(frozen=True)
class SearchResult:
    best: Evaluation
    """The passing plan with the fewest FP32 nodes found."""
    complete: bool
    """False when the budget ran out before pruning finished (the plan passes but may keep too much FP32)."""
    all_low: Evaluation
    all_fp32: Evaluation | None
    prefix: int
    """Length of the shortest passing prefix of the ranking (0 when all-low passed)."""


class Unreachable(UserError):
    """Even with every candidate in FP32 the bound fails."""


def _first_passing(oracle: Oracle, fixed: Sequence[str], ranked: Sequence[str], lo: int, hi: int) -> int:
    """Smallest j in (lo, hi] with fixed + ranked[:j] passing, given lo fails and hi passes (binary search)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if oracle.evaluate([*fixed, *ranked[:mid]]).passed:
            hi = mid
        else:
            lo = mid
    return hi


def search(oracle: Oracle, candidates: Sequence[str], ranking: Callable[[], Sequence[str]]) -> SearchResult:
    """See the module docstring; ``ranking()`` (the sensitivity probe) runs only when all-low fails.
    :class:`Unreachable` or a budget UserError when no passing plan is found."""
    try:
        all_low = oracle.evaluate([])
    except BudgetExhausted:
        raise _no_plan(oracle) from None
    if all_low.passed or not candidates:
        if not all_low.passed:
            raise _unreachable(oracle, all_low, 0)
        return SearchResult(best=all_low, complete=True, all_low=all_low, all_fp32=None, prefix=0)
    ranked = list(ranking())
    try:
        all_fp32 = oracle.evaluate(ranked)
    except BudgetExhausted:
        raise _no_plan(oracle) from None
    if not all_fp32.passed:
        raise _unreachable(oracle, all_fp32, len(ranked))
    best, prefix, complete = all_fp32, len(ranked), False
    try:
        prefix = _first_passing(oracle, [], ranked, 0, len(ranked))
        best = oracle.evaluate(ranked[:prefix])
        needed, rest = [ranked[prefix - 1]], list(ranked[:prefix - 1])
        while rest:
            alone = oracle.evaluate(needed)
            if alone.passed:
                best = alone
                break
            j = _first_passing(oracle, needed, rest, 0, len(rest))
            needed.append(rest[j - 1])
            rest = rest[:j - 1]
            best = oracle.evaluate([*needed, *rest])
        kept = list(best.kept)
        order = {name: i for i, name in enumerate(ranked)}
        for name in sorted(kept, key=order.__getitem__, reverse=True):
            trial = oracle.evaluate([k for k in kept if k != name])
            if trial.passed:
                kept.remove(name)
                best = trial
        complete = True
    except BudgetExhausted:
        pass
    return SearchResult(best=best, complete=complete, all_low=all_low, all_fp32=all_fp32, prefix=prefix)


def _no_plan(oracle: Oracle) -> UserError:
    return UserError(where="--budget", problem=f"the budget of {oracle.budget} evaluation(s) ran out before any "
                     "plan meeting the bound was measured",
                     fix="raise --budget (at least 2: all-low, then all candidates FP32; ~2*log2(nodes)+10 "
                         "is typical)")


def _unreachable(oracle: Oracle, all_fp32: Evaluation, candidates: int) -> Unreachable:
    m = all_fp32.measurement
    bound = oracle.setup.bound
    misses = [f"{name} error {err:.3g} > {bound.limit(name):.3g}" for name, err in m.errors
              if err > bound.limit(name)]
    misses += [f"{name} top-1 agreement {a:.3f} < {bound.min_top1:.3f}" for name, a in m.top1 if a < bound.min_top1]
    misses += [f"{name} fails the tolerance policy" for name in m.policy_failures]
    return Unreachable(
        where="--max_error", problem=f"the bound is unreachable: even with all {candidates} candidate node(s) in "
        f"FP32 the converted model misses it ({'; '.join(misses)}); what remains in low precision (graph "
        "inputs/outputs, nodes forced low) already costs that much",
        fix="raise --max_error, or keep the graph inputs/outputs in FP32 with --keep_io_types")
