"""A run's nightly options (``--baseline``, ``--fail-on-regression``, ``--history``, ``--strict-provenance``): read
with the command line, checked before anything runs. What happens with them at the end is :mod:`harness.nightly.run`,
which a run without them never imports. Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.nightly.rules import OPTION, RECOMMENDED_RULES, Rule, parse_rules

DEFAULT_TREND_RUNS = 20
"""Runs of the history a report's trends show (:attr:`NightlyOptions.trend_runs`; ``castguard history --last``)."""

# Compared and shown when --baseline is given without --fail-on-regression (the run does not fail on them).
DISPLAY_RULES = RECOMMENDED_RULES


@dataclass(frozen=True)
class NightlyOptions:
    baseline: Path | None = None  # a report.json, a report folder, or a history folder
    rules: tuple[Rule, ...] = ()  # --fail-on-regression; empty: compare for display only
    history: Path | None = None  # store this run there
    strict_provenance: bool = False
    trend_runs: int = DEFAULT_TREND_RUNS

    def __post_init__(self) -> None:
        if self.rules and self.baseline is None and self.history is None:
            raise UserError(
                where=OPTION,
                problem="there is nothing to compare with",
                fix="add --baseline PATH (a report.json or a history folder) or --history DIR",
            )
        if self.trend_runs < 1:
            raise UserError(where="trend runs", problem=f"must be >= 1, got {self.trend_runs}", fix="e.g. 20")

    @property
    def active(self) -> bool:
        """Whether this run compares with a baseline or stores history (else there is nothing to do at the end)."""
        return self.compare_with is not None

    @property
    def compare_with(self) -> Path | None:
        """Where the baseline comes from: --baseline, else the --history folder itself."""
        return self.baseline if self.baseline is not None else self.history

    @property
    def effective_rules(self) -> tuple[Rule, ...]:
        return self.rules or parse_rules(DISPLAY_RULES)


def nightly_options(
    *,
    baseline: str | None,
    rules: Sequence[str] | None,
    history: str | None,
    strict_provenance: bool | None,
    invocation_dir: Path,
) -> NightlyOptions:
    """Build the options from the command line (paths relative to where pytest was invoked)."""
    return NightlyOptions(
        baseline=None if baseline is None else (invocation_dir / baseline).resolve(),
        rules=parse_rules(rules) if rules else (),
        history=None if history is None else (invocation_dir / history).resolve(),
        strict_provenance=bool(strict_provenance),
    )


def options_from(namespace: object, *, invocation_dir: Path) -> NightlyOptions:
    """:func:`nightly_options` from a parsed pytest namespace (the dests of harness.options.add_nightly_options)."""
    return nightly_options(
        baseline=getattr(namespace, "castguard_baseline", None),
        rules=getattr(namespace, "castguard_fail_on_regression", None),
        history=getattr(namespace, "castguard_history", None),
        strict_provenance=getattr(namespace, "castguard_strict_provenance", None),
        invocation_dir=invocation_dir,
    )
