"""``castguard history`` and ``castguard recheck``: argument parsing and dispatch (registered by harness.cli).

* ``castguard history DIR [--last N] [--accept NAME|latest]``: the trend table of a history folder; corrupt
  files are listed by name and counted. ``--accept`` marks a regressed run as an accepted baseline.
* ``castguard merge SHARD_DIR... --out DIR [--baseline PATH] [--history DIR] [--fail-on-regression RULES]``: the
  ``pytest --shard K/N`` runs of one night as one report, compared once (:mod:`harness.nightly.merge`; the command
  itself is in :mod:`harness.cli`, which builds the run object from the shards).
* ``castguard recheck REPORT_DIR [--atol [OUT:]V ...] [--rtol [OUT:]V ...] [--check-error-stat [OUT:]MODE ...]
  [--quantile [OUT:]Q ...]``: re-judge a report folder's saved outputs; exit 1 when a case now fails.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.console import Console
from harness.core.errors import UserError
from harness.judge.compare import MODES
from harness.options import NIGHTLY_OPTIONS

if TYPE_CHECKING:
    from harness.nightly.run import NightlyRun

_PER_OUTPUT = "[OUTPUT:]VALUE"


def add_history_command(sub: Any) -> None:
    parser = sub.add_parser("history", help="trend table of a --history folder (max error, low-precision share)")
    parser.add_argument("folder", metavar="DIR", help="the folder given to pytest --history")
    parser.add_argument("--last", type=int, default=None, help="show the last N runs (default 20)")
    parser.add_argument(
        "--accept",
        metavar="NAME|latest",
        default=None,
        help="accept a run that had regressions so it can serve as the next baseline",
    )
    parser.set_defaults(func=_history)


def add_recheck_command(sub: Any) -> None:
    parser = sub.add_parser(
        "recheck", help="re-judge a report folder with new tolerances (no conversion, no inference)"
    )
    parser.add_argument("report_dir", metavar="REPORT_DIR", help="a --report-dir of an earlier run")
    parser.add_argument(
        "--atol",
        nargs="+",
        default=[],
        metavar=_PER_OUTPUT,
        help="absolute tolerance, for every output or per output (Polygraphy syntax)",
    )
    parser.add_argument("--rtol", nargs="+", default=[], metavar=_PER_OUTPUT, help="relative tolerance")
    parser.add_argument(
        "--check-error-stat",
        nargs="+",
        default=[],
        metavar="[OUTPUT:]MODE",
        help=f"error statistic: {', '.join(MODES)}",
    )
    parser.add_argument(
        "--quantile", nargs="+", default=[], metavar=_PER_OUTPUT, help="quantile for --check-error-stat quantile (0..1)"
    )
    parser.set_defaults(func=_recheck)


_MERGE_OPTIONS = ("--baseline", "--fail-on-regression", "--history")


def add_merge_command(sub: Any) -> argparse.ArgumentParser:
    """``castguard merge``'s arguments; the command (:func:`harness.cli`) builds the run object from the shards."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "merge",
        help="merge the report folders of pytest --shard K/N runs into one report, compared with the baseline once",
    )
    parser.add_argument("shard_dirs", nargs="+", metavar="SHARD_DIR", help="the --report-dir of each shard")
    parser.add_argument("--out", required=True, metavar="DIR", help="the merged report folder (created)")
    for option in NIGHTLY_OPTIONS:
        if option.flag in _MERGE_OPTIONS:
            option.register(parser.add_argument)
    return parser


def merge_nightly(args: argparse.Namespace, *, invocation_dir: Path) -> NightlyRun | None:
    """``castguard merge``'s ``--baseline``/``--history``/``--fail-on-regression`` (None when none is given)."""
    from harness.nightly.run import NightlyRun, nightly_options

    options = nightly_options(
        baseline=args.castguard_baseline,
        rules=args.castguard_fail_on_regression,
        history=args.castguard_history,
        strict_provenance=False,
        invocation_dir=invocation_dir,
    )
    return NightlyRun(options) if options.active else None


def _history(args: argparse.Namespace, out: Console) -> int:
    from harness.nightly.history import accept_run, read_history
    from harness.nightly.trend_data import DEFAULT_TREND_RUNS, history_trends
    from harness.nightly.trends import trend_table_text

    folder = Path(args.folder)
    if not folder.is_dir():
        raise UserError(where=folder, problem="history folder not found", fix="give the folder passed to --history")
    if args.accept is not None:
        out.result(f"accepted: {accept_run(folder, args.accept)}")
    history = read_history(folder)
    last = DEFAULT_TREND_RUNS if args.last is None else args.last
    out.result(trend_table_text(history_trends(history, last=last)))
    out.result(f"\n{len(history.runs)} run(s) in {folder}; {len(history.skipped)} unreadable file(s) skipped")
    for skipped in history.skipped:
        out.result(f"  skipped {skipped.path.name}: {skipped.reason}")
    return 0


def _recheck(args: argparse.Namespace, out: Console) -> int:
    from harness.nightly.recheck import ToleranceOverride, error_stat, non_negative, parse_per_output, recheck

    override = ToleranceOverride(
        atol=parse_per_output(args.atol, non_negative, where="--atol"),
        rtol=parse_per_output(args.rtol, non_negative, where="--rtol"),
        mode=parse_per_output(args.check_error_stat, error_stat, where="--check-error-stat"),
        quantile=parse_per_output(args.quantile, non_negative, where="--quantile"),
    )
    result = recheck(Path(args.report_dir), override=override)
    out.result(result.summary())
    return result.exit_code
