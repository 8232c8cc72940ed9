"""The search for the fewest FP32 nodes that meet the bound, on the :class:`~harness.tune.oracle.Oracle`.

Candidates arrive ranked (most sensitive per FLOP first, :func:`harness.tune.probe.rank`). Then:

1. all candidates low: done if it passes (1 evaluation);
2. all candidates FP32: if even that fails, the bound is unreachable (1 evaluation);
3. binary search for the shortest prefix of the ranking that passes when kept FP32 (log2 C evaluations);
4. extraction (adaptive group testing): the last node of that prefix is needed; keep it and find the shortest
   prefix of the rest that still passes with it, galloping down from the end (the next needed node is usually
   near the last one) then bisecting; its last node is needed too; repeat until the kept nodes alone pass.
   Finding a node ``g`` ranks after the previous one costs about ``2 log2 g + 1`` evaluations.

Each kept node comes with its evidence: a failing plan that holds every other kept node FP32 and it in low
precision. If errors only grow when nodes move to low precision (monotone), the kept set is minimal: no node
can go back. Every step holds a plan known to pass on all calibration inputs, so the result is verified even
when errors are not monotone, and a spent budget still returns the best passing plan found. For K kept nodes
of C candidates that is at most ``2 + log2 C + K (2 log2 C + 1)`` evaluations.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.errors import UserError
from harness.tune.oracle import BudgetExhausted, Evaluation, Oracle


@dataclass(frozen=True)
class SearchResult:
    best: Evaluation
    """The passing plan with the fewest FP32 nodes found."""
    complete: bool
    """False when the budget ran out before the extraction finished (the plan passes but may keep too much FP32)."""
    all_low: Evaluation
    all_fp32: Evaluation | None
    prefix: int
    """Length of the shortest passing prefix of the ranking (0 when all-low passed)."""
    evidence: Mapping[str, Evaluation] = field(default_factory=dict)
    """Per kept node: the failing plan that showed it is needed (every other kept node FP32, it in low precision,
    plus some not-kept candidates FP32)."""


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
    evidence: dict[str, Evaluation] = {}
    try:
        prefix = _first_passing(oracle, [], ranked, 0, len(ranked))
        best = oracle.evaluate(ranked[:prefix])
        needed, rest = [ranked[prefix - 1]], list(ranked[:prefix - 1])
        evidence[needed[0]] = oracle.evaluate(rest)
        while rest:
            j = _last_needed(oracle, needed, rest)
            if j == 0:
                best = oracle.evaluate(needed)
                break
            evidence[rest[j - 1]] = oracle.evaluate([*needed, *rest[:j - 1]])
            needed.append(rest[j - 1])
            rest = rest[:j - 1]
            best = oracle.evaluate([*needed, *rest])
        complete = True
    except BudgetExhausted:
        pass
    return SearchResult(best=best, complete=complete, all_low=all_low, all_fp32=all_fp32, prefix=prefix,
                        evidence=evidence)


def _last_needed(oracle: Oracle, needed: Sequence[str], rest: Sequence[str]) -> int:
    """Smallest j with needed + rest[:j] passing, given rest in full passes: gallop down from the end (the next
    needed node is usually close to the last one found), then binary search."""
    hi, step = len(rest), 1
    while True:
        j = max(len(rest) - step, 0)
        if not oracle.evaluate([*needed, *rest[:j]]).passed:
            return _first_passing(oracle, needed, rest, j, hi)
        hi = j
        if j == 0:
            return 0
        step *= 2


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
