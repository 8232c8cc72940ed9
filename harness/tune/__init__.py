"""``castguard tune``: accuracy-driven precision selection (the fewest FP32 nodes that meet an error bound).

Modules: ``bound`` (the bound and its measurement), ``probe`` (per-node sensitivity in one ORT run),
``oracle`` (one plan evaluation on ``emulate``, budget and memo), ``search`` (ranked prefix + group testing +
pruning), ``memo`` (the cache), ``stress`` (the hunt for an input over the bound: box corners, coordinate ascent,
Hypothesis), ``rounds`` (counterexample-guided rounds), ``plan`` (the JSON), ``engine`` (``tune``),
``cli`` (``castguard tune``).

The names below are imported on first use: a module that needs one part (the diagnosis reads ``bound``) does not
load the tuning engine with it (a warm sweep imports no more than it runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.lazy import lazy_names

_API = {
    "DEFAULT_MAX_ERROR": "bound",
    "Bound": "bound",
    "Measurement": "bound",
    "measure": "bound",
    "Plan": "plan",
    "TuneOutcome": "engine",
    "TuneSettings": "engine",
    "range_options": "engine",
    "tune": "engine",
}

__all__ = sorted(_API)


__getattr__ = lazy_names(__name__, _API)  # see the module docstring


if TYPE_CHECKING:
    from harness.tune.bound import DEFAULT_MAX_ERROR as DEFAULT_MAX_ERROR
    from harness.tune.bound import Bound as Bound
    from harness.tune.bound import Measurement as Measurement
    from harness.tune.bound import measure as measure
    from harness.tune.engine import TuneOutcome as TuneOutcome
    from harness.tune.engine import TuneSettings as TuneSettings
    from harness.tune.engine import range_options as range_options
    from harness.tune.engine import tune as tune
    from harness.tune.plan import Plan as Plan
