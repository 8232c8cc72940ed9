"""The search for the fewest FP32 nodes that meet the bound, on the :class:`~harness.tune.oracle.Oracle`.

Candidates arrive ranked (most sensitive per FLOP first, :func:`harness.tune.probe.rank`). Then:

1. all candidates low: done if it passes (1 evaluation);
2. all candidates FP32: if even that fails, the bound is unreachable (1 evaluation; from here on a passing
   plan is always in hand);
3. the shortest prefix of the ranking that passes when kept FP32: gallop up (1, 2, 4, ... nodes; a good
   ranking puts the needed nodes first), then bisect (about 2 log2 p + 1 evaluations for a prefix of p);
4. extraction (adaptive group testing): the last node of that prefix is needed. If it alone passes, that is the
   plan (1 evaluation). Otherwise find the shortest prefix of the rest that still passes with it, galloping down
   from the end (the next needed node is usually near the last one) then bisecting; its last node is needed
   too; repeat until the kept nodes alone pass. A node ``g`` places before the previous one costs about
   ``2 log2 g + 1`` evaluations.

Each kept node comes with its evidence: a failing plan that holds every other kept node FP32 and it in low
precision. If errors only grow when nodes move to low precision (monotone), the kept set is minimal: no node
can go back. Every step holds a plan known to pass on all calibration inputs, so the result is verified even
when errors are not monotone, and a spent budget still returns the best passing plan found. For K kept nodes
of C candidates the gaps sum to at most C, so by concavity the cost is at most about
``2 log2 C + 3 + K (2 log2 (C / K) + 1)``, within ``2 (K + 1) log2 C + 10``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.convert import ConvertOptions
from harness.core.errors import UserError
from harness.tune.oracle import BudgetExhausted, Evaluation, Oracle


@dataclass(frozen=True)
class SearchResult:
    best: Evaluation
    """The passing plan with the fewest FP32 nodes found."""
    complete: bool
    """False when the budget ran out before the extraction finished (the plan passes but may keep too much FP32)."""
    all_low: Evaluation
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
        raise _no_plan(oracle, len(candidates)) from None
    if all_low.passed or not candidates:
        if not all_low.passed:
            raise _unreachable(oracle, all_low, 0)
        return SearchResult(best=all_low, complete=True, all_low=all_low, prefix=0)
    ranked = list(ranking())
    try:
        all_fp32 = oracle.evaluate(ranked)
    except BudgetExhausted:
        raise _no_plan(oracle, len(candidates)) from None
    if not all_fp32.passed:
        raise _unreachable(oracle, all_fp32, len(ranked))
    evidence: dict[str, Evaluation] = {}
    best, prefix, complete = all_fp32, len(ranked), False
    try:
        prefix = _shortest_prefix(oracle, ranked)
        best = oracle.evaluate(ranked[:prefix])
        needed, rest = [ranked[prefix - 1]], list(ranked[: prefix - 1])
        evidence[needed[0]] = oracle.evaluate(rest)
        if rest and oracle.evaluate(needed).passed:  # one node is the common case: 1 evaluation, not log2
            best, rest = oracle.evaluate(needed), []
        while rest:
            j = _last_needed(oracle, needed, rest)
            if j == 0:
                best = oracle.evaluate(needed)
                break
            evidence[rest[j - 1]] = oracle.evaluate([*needed, *rest[: j - 1]])
            needed.append(rest[j - 1])
            rest = rest[: j - 1]
            best = oracle.evaluate([*needed, *rest])
        complete = True
    except BudgetExhausted:
        pass
    return SearchResult(best=best, complete=complete, all_low=all_low, prefix=prefix, evidence=evidence)


def _shortest_prefix(oracle: Oracle, ranked: Sequence[str]) -> int:
    """The shortest passing prefix of the ranking, given that none fails and all passes: gallop up 1, 2, 4, ...
    (a good ranking puts the needed nodes first), then bisect."""
    lo, hi, n = 0, len(ranked), 1
    while n < hi:
        if oracle.evaluate(ranked[:n]).passed:
            hi = n
            break
        lo, n = n, 2 * n
    return _first_passing(oracle, [], ranked, lo, hi)


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


def search_cost(candidates: int, kept: int) -> int:
    """Evaluations one search needs at most (about) for `kept` nodes of `candidates` (the module docstring's
    bound ``2 (K + 1) log2 C + 10``)."""
    return 2 * (kept + 1) * math.ceil(math.log2(max(candidates, 2))) + 10


def _no_plan(oracle: Oracle, candidates: int) -> UserError:
    return UserError(
        where="--budget",
        problem=f"the budget of {oracle.budget} evaluation(s) ran out before any plan meeting the bound was measured",
        fix=f"raise --budget (at least 2: all-low, then all candidates FP32; for {candidates} candidates a search "
        f"that keeps K nodes FP32 needs about 2*(K+1)*log2({candidates})+10: {search_cost(candidates, 1)} for one "
        "node, more for each round of --rounds)",
    )


def _unreachable(oracle: Oracle, all_fp32: Evaluation, candidates: int) -> Unreachable:
    m = all_fp32.measurement
    bound = oracle.setup.bound
    misses = [f"{name} error {err:.3g} > {bound.limit(name):.3g}" for name, err in m.errors if err > bound.limit(name)]
    misses += [f"{name} top-1 agreement {a:.3f} < {bound.min_top1:.3f}" for name, a in m.top1 if a < bound.min_top1]
    misses += [f"{name} fails the tolerance policy" for name in m.policy_failures]
    return Unreachable(
        where="--max_error",
        problem=f"the bound is unreachable: even with all {candidates} candidate node(s) in "
        f"FP32 the converted model misses it ({'; '.join(misses)}); what remains in low precision (graph "
        "inputs/outputs, nodes forced low) already costs that much",
        fix="raise --max_error" + keep_io_hint(oracle.setup.options, lead=", or "),
    )


def keep_io_hint(options: ConvertOptions, *, lead: str) -> str:
    """``lead`` + the --keep_io_types advice, or "" when it was given (the advice would change nothing)."""
    return "" if options.keep_io_types else f"{lead}keep the graph inputs/outputs in FP32 with --keep_io_types"
