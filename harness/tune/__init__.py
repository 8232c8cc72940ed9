"""``castguard tune``: accuracy-driven precision selection (the fewest FP32 nodes that meet an error bound).

Modules: ``bound`` (the bound and its measurement), ``probe`` (per-node sensitivity in one ORT run),
``oracle`` (one plan evaluation on ``emulate``, budget and memo), ``search`` (ranked prefix + group testing +
pruning), ``memo`` (the cache), ``stress`` (the hunt for an input over the bound: box corners, coordinate ascent,
Hypothesis), ``rounds`` (counterexample-guided rounds), ``plan`` (the JSON), ``engine`` (``tune``),
``cli`` (``castguard tune``).
"""

from __future__ import annotations

from harness.tune.bound import DEFAULT_MAX_ERROR, Bound, Measurement, measure
from harness.tune.engine import TuneOutcome, TuneSettings, range_options, tune
from harness.tune.plan import Plan

__all__ = [
    "DEFAULT_MAX_ERROR",
    "Bound",
    "Measurement",
    "Plan",
    "TuneOutcome",
    "TuneSettings",
    "measure",
    "range_options",
    "tune",
]
