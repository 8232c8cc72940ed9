"""``castguard tune``: every ``castguard convert`` flag, plus the bound, the budget and the plan path.

Exit codes: 0 tuned, model and plan saved, and the plan holds on every input tried (the tuning inputs and every
counterexample the hunt found); 1 the hunt still found an input over the bound after the last round: the plan is
written (with the counterexamples), the model is not; 2 bad input, unreachable bound or spent budget (one
message naming the problem and the fix, no traceback, neither the model nor the plan written). A budget spent
before the search finished is an error when the plan it leaves has nothing in low precision, or less than a
default conversion that itself meets the bound; where the default misses the bound, the best plan that holds is
written (exit 0) and the summary says so.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.convert.cli import get_parser as convert_parser
from harness.convert.cli import log_level, options_from_args, output_path, reference_from_args
from harness.core.console import Console
from harness.core.errors import UserError
from harness.core.files import atomic_write_text
from harness.data.onnxsave import save_model
from harness.judge.tolerances import TolerancePolicy, parse_tolerance_policy
from harness.tune.baseline import default_note
from harness.tune.bound import Bound, parse_max_error
from harness.tune.engine import TuneOutcome, TuneSettings, range_options, tune
from harness.tune.oracle import Evaluation
from harness.tune.search import keep_io_hint

DEFAULT_CACHE = ".castguard-cache"
TableLoader = Callable[[Path], Mapping[str, Any]]


def get_parser() -> argparse.ArgumentParser:
    parser = convert_parser()
    parser.prog = "castguard tune"
    parser.description = (
        "Keep the fewest nodes FP32 that meet an error bound: start from the magnitude facts (nodes "
        "beyond the low type's range stay FP32), rank the rest by measured sensitivity, and search "
        "on the emulate oracle. Takes every `castguard convert` flag."
    )
    parser.set_defaults(data_max=None, log_level="WARNING")
    add = parser.add_argument
    add(
        "--max_error",
        default=None,
        help="bound on max|y - gold| / max|gold| per output over the calibration inputs "
        "(default 1e-3 for fp16, 1e-2 for bf16); or per output NAME=E[,NAME=E]",
    )
    add(
        "--budget",
        default="auto",
        help="most model evaluations the search may spend (default auto: sized from the candidate nodes and "
        "--rounds, 2*(K+1)*log2(candidates)+10 a round)",
    )
    add("--plan_path", default=None, help="where the plan JSON goes (default <output without .onnx>.plan.json)")
    add(
        "--tolerance_policy",
        action="store_true",
        help="also require castguard's per-output tolerance policy "
        "(precision-aware defaults plus [tool.castguard.tolerances] of --pyproject)",
    )
    add("--pyproject", default=None, help="pyproject.toml whose [tool.castguard.tolerances] --tolerance_policy uses")
    add("--top1_outputs", nargs="+", default=[], help="classifier outputs whose argmax (last axis) must agree")
    add("--min_top1", type=float, default=1.0, help="least top-1 agreement for --top1_outputs (default 1.0)")
    add("--cache_dir", default=DEFAULT_CACHE, help=f"sensitivity/evaluation cache (default {DEFAULT_CACHE})")
    add("--no_cache", action="store_true", help="neither read nor write the cache")
    add(
        "--adversarial_examples",
        default="30",
        help="Hypothesis inputs tried on the tuned model after the search, "
        "after the deterministic corner search of the input box (default 30; 0 skips the whole hunt)",
    )
    add(
        "--rounds",
        default="3",
        help="counterexample-guided rounds: an input the hunt finds over the bound joins the "
        "tuning inputs and the search runs again, at most this many times (default 3; 0: report it only)",
    )
    add(
        "--random_inputs",
        default="8",
        help="seeded random inputs to tune on when no --calibration_data is given "
        "(default 8; the first is castguard convert's reference input)",
    )
    return parser


def _whole(text: str, flag: str, least: int) -> int:
    value: int | None
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise UserError(
            where=flag,
            problem=f"{text!r} is not a whole number >= {least}",
            fix="give e.g. --budget 64 (or auto)" if flag == "--budget" else f"give e.g. {flag} 30",
        )
    return value


def _bound(args: argparse.Namespace, load_table: TableLoader | None) -> Bound:
    default, per_output = parse_max_error(args.max_error)
    policy = TolerancePolicy()
    if args.tolerance_policy and load_table is not None:
        root = Path(args.pyproject).parent if args.pyproject else Path.cwd()
        table = load_table(root).get("tolerances", {})
        if table:
            policy = parse_tolerance_policy(table, where=f"{root / 'pyproject.toml'} [tool.castguard.tolerances]")
    return Bound(
        precision=args.low_precision_type,
        max_error=default,
        per_output=per_output,
        use_policy=args.tolerance_policy,
        top1_outputs=tuple(args.top1_outputs),
        min_top1=args.min_top1,
        policy=policy,
    )


def _progress(out: Console, budget: int | None):  # type: ignore[no-untyped-def]
    def show(evaluation: Evaluation, spent: int, best: Evaluation | None) -> None:
        verdict = "pass" if evaluation.passed else "fail"
        best_text = (
            (
                f"best so far: {len(best.kept)} FP32, low-precision share {100 * best.lowp_flop_share:.1f}%, "
                f"error/bound {best.measurement.ratio:.3g}"
            )
            if best
            else "no passing plan yet"
        )
        out.info(
            f"[castguard tune] evaluation {spent}/{budget or 'auto'}: {len(evaluation.kept)} kept FP32 -> {verdict} "
            f"(error/bound {evaluation.measurement.ratio:.3g}); {best_text}",
            stderr=True,
        )

    return show


def run(
    args: argparse.Namespace, *, load_table: TableLoader | None = None, out: Console | None = None
) -> tuple[Path, Path, TuneOutcome]:
    """Tune and save; ``load_table(rootdir)`` reads ``[tool.castguard]`` for --tolerance_policy (config layer);
    ``out`` shows the progress (hidden by ``-q``)."""
    budget = None if args.budget == "auto" else _whole(args.budget, "--budget", 1)
    examples = _whole(args.adversarial_examples, "--adversarial_examples", 0)
    rounds = _whole(args.rounds, "--rounds", 0)
    random_inputs = _whole(args.random_inputs, "--random_inputs", 1)
    bound = _bound(args, load_table)
    data_max_given = args.data_max is not None
    if not data_max_given:
        args.data_max = 512.0  # placeholder for output_path/options; replaced by the range limit below
    target = output_path(args)
    plan_path = (
        Path(args.plan_path)
        if args.plan_path
        else target.with_name(
            (target.name[: -len(".onnx")] if target.name.endswith(".onnx") else target.name) + ".plan.json"
        )
    )
    default_options = options_from_args(args)  # what castguard convert does with these flags
    options = range_options(default_options, data_max_given=data_max_given)
    settings = TuneSettings(
        bound=bound,
        budget=budget,
        stress_examples=examples,
        seed=args.seed,
        cache_dir=None if args.no_cache else Path(args.cache_dir),
        output_path=str(target),
        rounds=rounds,
        random_inputs=random_inputs,
    )
    outcome = tune(
        Path(args.onnx_path),
        options=options,
        reference=reference_from_args(args),
        settings=settings,
        progress=_progress(out or Console.from_args(args), budget),
        default_options=default_options,
    )
    save_together(outcome, target=target, plan_path=plan_path)
    return target, plan_path, outcome


def save_together(outcome: TuneOutcome, *, target: Path, plan_path: Path) -> None:
    """The tuned model (when the plan holds) and its plan, both or neither: the plan is written to a temporary name
    first, renamed into place only once the model is saved, and removed when the model cannot be (a full disk)."""
    pending = plan_path.with_name(f".{plan_path.name}.pending.tmp")
    atomic_write_text(pending, outcome.plan.to_json())
    try:
        if outcome.holds:
            save_model(outcome.conversion.model, target)
        os.replace(pending, plan_path)
    finally:
        pending.unlink(missing_ok=True)


def summary(target: Path, plan_path: Path, outcome: TuneOutcome) -> str:
    plan = outcome.plan
    errors = ", ".join(f"{k} {v:.3g}" for k, v in plan.error.items())
    rounds = outcome.rounds
    found = len(rounds.counterexamples)
    added = found - (0 if outcome.holds else 1)  # the last one broke the final plan: not tuned on
    tuning = len(rounds.setup.feeds) - added
    lines = [
        f"tuned model: {target}" if outcome.holds else "tuned model: NOT WRITTEN (the plan does not hold)",
        f"plan: {plan_path}",
        f"kept FP32 by the search: {len(plan.kept_fp32)} of {plan.candidates} candidates"
        + (f" ({', '.join(plan.kept_fp32[:8])}{', ...' if len(plan.kept_fp32) > 8 else ''})" if plan.kept_fp32 else ""),
        f"low-precision FLOP share: {100 * plan.lowp_flop_share:.1f}%; error per output: {errors} "
        f"(bound {plan.bound['max_error']:g}, on {tuning + added} input(s): {tuning} tuning input(s) + {added} "
        "counterexample(s) found by the hunt)",
        f"evaluations: {plan.evaluations} new + {plan.evaluations_cached} from cache; {plan.seconds:.1f} s"
        + (
            ""
            if plan.complete
            else " (budget spent before pruning finished: the plan passes but may keep more FP32 than needed)"
        ),
    ]
    note = default_note(outcome.default, outcome.conversion, outcome.holds)
    if note:
        lines.append(note)
    for number, round_ in enumerate(rounds.rounds, start=1):
        s = round_.stress
        if s is None:
            continue
        lines.append(
            f"round {number}: tuned on {round_.inputs} input(s), {len(round_.kept)} kept FP32; hunt in "
            f"{s.domain}: {s.corners} corner(s) + {s.examples - s.corners} more input(s), worst error/bound "
            f"{s.worst_ratio:.3g}, worst low-precision peak/range {s.worst_peak:.3g}: "
            + (
                f"FOUND an input over the bound ({s.found_by}; with it the error/bound is "
                f"{s.failing_ratio or s.worst_ratio:.3g})"
                if s.failing_feed is not None
                else "none over the bound"
            )
        )
    stopped = rounds.stopped
    if not outcome.holds:
        lines.append(
            "verdict: the plan does NOT hold: the last hunt found an input over the bound after "
            f"{len(plan.rounds)} round(s) (recorded in the plan under inputs.counterexamples)"
            + (f"; {stopped}" if stopped else "")
            + "; fix: raise --rounds or --budget, give --calibration_data that covers such inputs"
            + keep_io_hint(rounds.setup.options, lead=", ")
            + ", or raise --max_error"
        )
    elif outcome.stress is None:
        lines.append("verdict: the plan holds on the tuning inputs (no hunt: --adversarial_examples 0)")
    else:
        lines.append("verdict: the plan holds on every tuning input and every input the hunt tried")
    return "\n".join(lines)


def main(
    argv: list[str] | None = None, *, load_table: TableLoader | None = None, lead: argparse.Namespace | None = None
) -> int:
    """``castguard tune``: ``-q`` hides the progress lines (the summary stays), ``-qq`` the summary too, ``-v``
    shows the conversion's log (``lead``: the console options given before the subcommand)."""
    args = get_parser().parse_args(argv)
    out = Console.from_args(*([lead] if lead is not None else []), args)
    level = log_level(args.log_level, out.verbosity)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s - [castguard][tune] - %(levelname)s - %(message)s"
    )
    logging.getLogger("harness.convert").setLevel(level)
    try:
        target, plan_path, outcome = run(args, load_table=load_table, out=out)
    except UserError as err:
        out.error(f"castguard tune: {err}")
        return 2
    out.result(summary(target, plan_path, outcome))
    return 0 if outcome.holds else 1
