"""What a tuned plan is measured against: castguard convert's default conversion, and the budget a search needs.

* :func:`check_default` measures the default conversion (``castguard convert`` with the same flags) on the tuning
  inputs against the bound. A plan cut short by the budget is refused only where that default itself holds with
  more in low precision (:func:`refuse_short_plan`): where the default misses the bound, the best plan that holds is
  worth writing, and :func:`default_note` says so.
* :func:`sized_budget`: the search costs at most about ``2 (K + 1) log2 C + 10`` evaluations for K kept nodes of C
  candidates (:mod:`harness.tune.search`), once per round of counterexample-guided tuning. The default budget
  assumes ``K = log2 C`` (at least 3); a spent budget's message gives the figure for the K the search had reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.convert import ConversionResult
from harness.core.errors import UserError
from harness.tune.bound import measure
from harness.tune.oracle import Setup
from harness.tune.search import search_cost


@dataclass(frozen=True)
class DefaultCheck:
    """The default conversion on the tuning inputs: its low-precision share, its worst error over the bound."""

    share: float
    ratio: float
    holds: bool

    def to_json(self) -> dict[str, object]:
        """The plan file's ``default_conversion``."""
        return {"lowp_flop_share": self.share, "error_over_bound": self.ratio, "holds": self.holds}


def check_default(setup: Setup, conversion: ConversionResult) -> DefaultCheck:
    """Run the default conversion on emulate over the tuning inputs and measure it against the bound."""
    measured = measure(setup.run(conversion.model), setup.goldens, setup.bound)
    return DefaultCheck(share=conversion.lowp_flop_share, ratio=measured.ratio, holds=measured.passed)


def sized_budget(candidates: int, rounds: int) -> int:
    """The default budget: every round's search with ``K = max(3, log2 C)`` kept nodes."""
    kept = max(3, math.ceil(math.log2(max(candidates, 2))))
    return (rounds + 1) * search_cost(candidates, kept)


def default_note(default: DefaultCheck | None, final: ConversionResult, holds: bool) -> str:
    """The line that says the default misses the bound and the plan holds; "" otherwise."""
    if default is None or default.holds or not holds:
        return ""
    return (
        f"the default conversion misses the bound (error/bound {default.ratio:.3g}); "
        f"this plan holds at {100 * final.lowp_flop_share:.1f} %"
    )


@dataclass(frozen=True)
class Spent:
    """What the search had spent when the budget ran out: for the message's true figure."""

    budget: int
    candidates: int
    kept: int
    rounds: int


def refuse_short_plan(final: ConversionResult, *, default: DefaultCheck | None, spent: Spent) -> None:
    """A spent budget may still return a passing plan, but not one with nothing in low precision, nor one with less
    than a default conversion that itself holds (that plan is worse than not tuning)."""
    share = final.lowp_flop_share
    if not final.low_nodes or share <= 0:
        problem, alternative = "nothing in low precision", ""
    elif default is not None and default.holds and share < default.share:
        problem = (
            f"a low-precision share of {100 * share:.1f}%, less than the default conversion's "
            f"{100 * default.share:.1f}% (which holds: error/bound {default.ratio:.3g})"
        )
        alternative = ", or use castguard convert's default"
    else:
        return
    need = (spent.rounds + 1) * search_cost(spent.candidates, max(spent.kept, 1))
    raise UserError(
        where="--budget",
        problem=f"the budget of {spent.budget} evaluation(s) ran out before the search "
        f"finished, and the best plan it had measured has {problem}; no model was written",
        fix=f"raise --budget: for {spent.candidates} candidates, {spent.kept} node(s) kept so far and "
        f"{spent.rounds + 1} round(s), the search needs about {need} (2*(kept+1)*log2(candidates)+10 a round)"
        + alternative,
    )
