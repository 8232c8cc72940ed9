"""``tune``: the fewest FP32 nodes that meet an error bound, from the magnitude facts and the ``emulate`` oracle.

1. Load the model and collect magnitudes exactly as ``castguard convert`` does (same data, same seed), and the
   FP32 goldens on the tuning inputs (ORT CPU): the calibration data, else ``random_inputs`` seeded random feeds.
2. The base conversion uses ``data_max`` = the low type's largest finite value unless given: a node whose
   values exceed the low type's range stays FP32 with no evaluation spent, as does every node another rule
   keeps FP32 (schema, exclusions, user precisions). Every other low node is a candidate.
3. Sensitivity per candidate (:mod:`harness.tune.probe`, one ORT run), ranking, and the search
   (:mod:`harness.tune.search`) on :class:`~harness.tune.oracle.Oracle`, with the tune cache (:mod:`memo`).
4. The final conversion and the hunt for an input over the bound (:mod:`stress`: box corners, then Hypothesis);
   a counterexample joins the tuning inputs and the search runs again (:mod:`rounds`), a few rounds at most.
   The :class:`~plan.Plan` records every tuning input and counterexample, and whether the plan holds on all.
5. A budget spent before the search finished must still leave something in low precision, and no less than
   the default conversion where that default meets the bound (else a UserError: nothing is written); where the
   default misses the bound, the best plan that holds is written and the summary says so
   (:mod:`harness.tune.baseline`). The budget, unless given, is sized from the candidates and the rounds.

Nothing is written here except the cache; the caller saves the model and the plan once everything succeeded.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from harness.convert import ConversionResult, ConvertOptions, ReferenceData, convert
from harness.convert.reference import reference_run
from harness.core.dtypes import LOW_MAX
from harness.core.errors import UserError
from harness.core.version import __version__
from harness.data.onnxfile import load_model, model_sha256
from harness.tune.baseline import DefaultCheck, Spent, check_default, refuse_short_plan, sized_budget
from harness.tune.bound import Bound
from harness.tune.inputs import inputs_json, load_feeds, refuse_unsized
from harness.tune.memo import TuneCache
from harness.tune.oracle import Oracle, Setup, exact, fp32_outputs
from harness.tune.plan import Plan, convert_args
from harness.tune.probe import Sensitivity
from harness.tune.rounds import Progress, Rounds, RoundsPlan, search_rounds
from harness.tune.search import SearchResult
from harness.tune.stress import StressOutcome


@dataclass(frozen=True)
class TuneSettings:
    """How to search: the bound, the budget, the cache, the stress search, the output path for the replay line."""

    bound: Bound = Bound()
    budget: int | None = None
    """Most evaluations; None: sized from the candidate count and the rounds (:func:`baseline.sized_budget`)."""
    cache_dir: Path | None = None
    stress_examples: int = 30
    seed: int = 0
    output_path: str = "tuned.onnx"
    rounds: int = 3
    """Extra rounds of counterexample-guided tuning (a hunt's finding joins the tuning inputs); 0: one search."""
    random_inputs: int = 8
    """Seeded random inputs to tune on when no calibration data is given."""

    def __post_init__(self) -> None:
        if self.budget is not None and (
            isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < 1
        ):
            raise UserError(
                where="--budget",
                problem=f"the budget must be a whole number of evaluations >= 1, got {self.budget!r}",
                fix="give e.g. --budget 64 (each evaluation converts and runs the "
                "model once on emulate over the calibration inputs)",
            )
        for flag, value, least in (("--rounds", self.rounds, 0), ("--random_inputs", self.random_inputs, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise UserError(
                    where=flag,
                    problem=f"must be a whole number >= {least}, got {value!r}",
                    fix=f"give e.g. {flag} {3 if least == 0 else 8}",
                )
        if isinstance(self.stress_examples, bool) or self.stress_examples < 0:
            raise UserError(
                where="--adversarial_examples",
                problem=f"must be >= 0, got {self.stress_examples!r}",
                fix="give e.g. 30, or 0 to skip the Hypothesis search",
            )


@dataclass(frozen=True)
class TuneSource:
    """Where the tuned model and its data came from: the model file and its content hash (the plan names both),
    the reference data settings (None: in-memory data, so no ``castguard convert`` replay line) and what the
    tuning inputs are (the plan's ``inputs`` record)."""

    model_path: Path
    sha256: str
    reference: ReferenceData | None = None
    inputs_source: str = ""


@dataclass(frozen=True)
class TuneOutcome:
    """The plan, the rounds that found it (the search, its conversion, the hunt: one home, read through the
    properties below) and castguard convert's default conversion measured against the bound (None: not measured)."""

    plan: Plan
    rounds: Rounds
    default: DefaultCheck | None = None

    @property
    def conversion(self) -> ConversionResult:
        """The final plan's conversion."""
        return self.rounds.final

    @property
    def search(self) -> SearchResult:
        """The last round's search."""
        return self.rounds.result

    @property
    def sensitivity(self) -> Sensitivity | None:
        """None when every candidate in low precision already met the bound (no probe was needed)."""
        return self.rounds.sensitivity

    @property
    def stress(self) -> StressOutcome | None:
        """The last round's hunt (None: no hunt)."""
        return self.rounds.stress

    @property
    def holds(self) -> bool:
        """The plan met the bound on every input the hunt found (see :mod:`harness.tune.rounds`)."""
        return self.rounds.holds


def range_options(options: ConvertOptions, *, data_max_given: bool) -> ConvertOptions:
    """The tune's base options: ``data_max`` is the low type's range unless the user gave one."""
    return options if data_max_given else replace(options, data_max=LOW_MAX[options.low_elem])


def _forced_low(options: ConvertOptions, names: list[str], ops: Mapping[str, str]) -> set[str]:
    """Low nodes the user forced low (include lists, low node_precisions): excluding them would do nothing."""
    include = [re.compile(p) for p in options.nodes_to_include]
    low_keys = {k for k, v in options.node_precisions if v != "fp32"}
    return {
        n
        for n in names
        if any(p.match(n) for p in include)
        or ops[n] in options.op_types_to_include
        or n in low_keys
        or ops[n] in low_keys
    }


def tune(
    onnx_path: Path,
    *,
    options: ConvertOptions,
    reference: ReferenceData,
    settings: TuneSettings,
    progress: Progress | None = None,
    default_options: ConvertOptions | None = None,
) -> TuneOutcome:
    """Search the plan; see the module docstring. UserError for bad input, an unreachable bound or a spent budget
    (also when it leaves less in low precision than ``default_options``, castguard convert's own conversion)."""
    start = time.perf_counter()
    model = load_model(onnx_path)
    refuse_unsized(model, reference, where=onnx_path)
    magnitudes = reference_run(model, replace(reference, dynamic_default=None)).magnitudes  # unsized: refused above
    feeds, inputs_source = load_feeds(model, reference, random_inputs=settings.random_inputs)
    setup = Setup(
        model=model,
        options=options,
        magnitudes=magnitudes,
        feeds=feeds,
        bound=settings.bound,
        goldens=fp32_outputs(model, feeds, model_dir=onnx_path.parent),
        model_dir=onnx_path.parent,
        use_magnitudes=not math.isinf(options.data_max),
    )  # as convert_path does
    default = (
        None
        if default_options is None
        else check_default(
            setup,
            convert(
                model,
                options=default_options,
                magnitudes=None if math.isinf(default_options.data_max) else magnitudes,
                shapes=magnitudes.shapes,
            ),
        )
    )
    source = TuneSource(
        model_path=onnx_path, sha256=model_sha256(onnx_path), reference=reference, inputs_source=inputs_source
    )
    outcome = tune_setup(setup, source, settings=settings, progress=progress, default=default)
    return replace(outcome, plan=replace(outcome.plan, seconds=time.perf_counter() - start))


def candidates_of(setup: Setup) -> tuple[ConversionResult, list[str]]:
    """The base conversion and its candidates: low nodes the user did not force low."""
    base = setup.convert(())
    ops = {n.name: n.op_type for n in base.model.graph.node}
    forced = _forced_low(setup.options, list(base.low_nodes), ops)
    return base, [n for n in base.low_nodes if n not in forced]


def tune_setup(
    setup: Setup,
    source: TuneSource,
    *,
    settings: TuneSettings,
    progress: Progress | None = None,
    default: DefaultCheck | None = None,
) -> TuneOutcome:
    """The search on a ready :class:`Setup` (the harness passes its goldens and magnitudes). ``default``: castguard
    convert's default conversion measured against the bound (:func:`baseline.check_default`). The plan's
    ``seconds`` count from here (:func:`tune` counts its loading and reference run too)."""
    start = time.perf_counter()
    model_path, sha256, reference = source.model_path, source.sha256, source.reference
    options, bound = setup.options, settings.bound
    if bound != setup.bound or bound.precision != options.low_precision_type:
        raise UserError(
            where="Bound.precision",
            problem=f"{bound.precision} bound for a {options.low_precision_type} conversion",
            fix="build the Bound with the conversion's precision",
        )
    bound.check_outputs(list(setup.goldens[0]))
    base, candidates = candidates_of(setup)
    cache = TuneCache(settings.cache_dir) if settings.cache_dir is not None else None
    budget = settings.budget if settings.budget is not None else sized_budget(len(candidates), settings.rounds)
    searching = RoundsPlan(
        sha256=sha256,
        budget=budget,
        extra_rounds=settings.rounds,
        stress_examples=settings.stress_examples,
        seed=settings.seed,
        cache=cache,
    )
    done = search_rounds(setup, candidates, searching, progress=progress)
    oracle, result, final, found = done.oracle, done.result, done.final, done.stress
    kept = tuple(n for n in candidates if n in result.best.kept)
    if not result.complete:
        spent = Spent(budget=budget, candidates=len(candidates), kept=len(kept), rounds=settings.rounds)
        refuse_short_plan(final, default=default, spent=spent)
    excludes = tuple(exact(n) for n in kept)
    replay = (
        ()
        if reference is None
        else convert_args(
            replace(options, nodes_to_exclude=(*options.nodes_to_exclude, *excludes)),
            reference,
            onnx_path=str(model_path),
            output_path=settings.output_path,
        )
    )
    plan = Plan(
        model=str(model_path),
        model_sha256=sha256,
        castguard_version=__version__,
        low_precision_type=options.low_precision_type,
        bound=bound.describe(),
        kept_fp32=kept,
        why={n: _why(n, oracle, result, done.sensitivity) for n in kept},
        range_fp32={n: reason for n, reason in base.high_nodes},
        candidates=len(candidates),
        evaluations=done.spent,
        evaluations_cached=done.reused,
        complete=result.complete,
        error=dict(result.best.measurement.errors),
        top1=dict(result.best.measurement.top1),
        lowp_flop_share=final.lowp_flop_share,
        all_low_error=dict(result.all_low.measurement.errors),
        seconds=time.perf_counter() - start,
        data_source=setup.magnitudes.data_source,
        convert_args=replay,
        nodes_to_exclude=excludes,
        adversarial=found.to_json() if found is not None else {"examples": 0},
        inputs=inputs_json(setup, done, source.inputs_source, reference),
        rounds=tuple(r.to_json() for r in done.rounds),
        holds=done.holds,
        default_conversion=default.to_json() if default is not None else {},
    )
    return TuneOutcome(plan=plan, rounds=done, default=default)


def _why(name: str, oracle: Oracle, result: SearchResult, sensitivity: Sensitivity | None) -> str:
    parts = []
    if sensitivity is not None and name in sensitivity.local:
        parts.append(f"local error {sensitivity.local[name]:.3g} when rounded alone")
        if name in sensitivity.blamed_by:
            parts.append(f"feeds {sensitivity.blamed_by[name]} (local error {sensitivity.sensitivity[name]:.3g})")
    proof = result.evidence.get(name)
    if proof is not None and not proof.passed:
        worst = proof.measurement.worst_output()
        parts.append(
            f"in {oracle.setup.bound.precision} (the other kept nodes FP32) the bound fails: {worst} error "
            f"{proof.measurement.error_of(worst):.3g} ({proof.measurement.ratio:.3g}x the bound)"
        )
    return "; ".join(parts)
