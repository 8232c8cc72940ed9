"""``castguard <subcommand>``: the command line outside pytest (no pytest import).

* ``castguard convert ...``: the AutoCast-compatible converter (``harness.convert.cli``), flags verbatim.
* ``castguard tune ...``: accuracy-driven precision selection (``harness.tune.cli``).
* ``castguard models``: the bundled models and their default inputs.
* ``castguard goldens --model X [...]``: write or verify FP32 goldens with the same options as the plugin.
* ``castguard cache [--prune]``: disk use of the cache and of the report folder's run folders; ``--prune``
  evicts least recently used cache entries beyond ``cache_max_mb`` and deletes run folders beyond ``keep_runs``.
* ``castguard replay FINDING.npz``: rerun a saved adversarial finding (exit 1 when it still fails).
* ``castguard history DIR`` / ``castguard recheck REPORT_DIR ...``: nightly regression (``harness.nightly.cli``).
* ``castguard merge SHARD_DIR... --out DIR``: the ``pytest --shard K/N`` runs of one night as one report and
  verdict (``harness.nightly.merge``).

User errors print one message on stderr and exit 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import UserError
from harness.nightly.cli import add_history_command, add_merge_command, add_recheck_command
from harness.options import add_options


def _models(_: argparse.Namespace) -> int:
    from harness.data.models import bundled_registry

    test_models = bundled_registry()

    for name in test_models.names():
        entry = test_models.MODELS[name]
        inputs = test_models.default_inputs(name)
        ranges = test_models.default_val_ranges(name)
        feed = f"inputs {inputs.name}" if inputs else (f"val-range {ranges}" if ranges else "random [-1,1]")
        print(f"{name:20s} {feed:32s} {entry.description}")
    return 0


def _goldens(args: argparse.Namespace) -> int:
    from harness.conductor import CastguardRun

    rootdir = Path(args.rootdir).resolve()
    run = CastguardRun.from_options(
        args, invocation_dir=Path.cwd(), rootpath=rootdir, project=rootdir, with_report=False
    )
    if run.session is None:
        raise UserError(where="castguard goldens", problem="no model given", fix="pass --model NAME|PATH")
    status = 0
    for name in run.session.models:
        outcome = run.session.check_fp32_golden(name)
        print(f"{name}: {outcome.status}" + (f"\n{outcome.message}" if outcome.message else ""))
        status = status or (1 if outcome.status in ("fail", "error") else 0)
    return status


def _cache(args: argparse.Namespace) -> int:
    from harness.config import HarnessConfig, load_table
    from harness.pipeline.cache_size import MB, evict, usage
    from harness.report.runs import folder_size, prune_runs, run_folders

    rootdir = Path(args.rootdir).resolve()
    cli = {
        "castguard_cache_dir": args.cache_dir,
        "castguard_cache_max_mb": args.max_mb,
        "castguard_report_dir": args.report_dir,
        "castguard_keep_runs": args.keep_runs,
    }
    config = HarnessConfig.from_sources(cli=cli, table=load_table(rootdir), rootdir=rootdir, invocation_dir=Path.cwd())
    if args.prune:
        gone = evict(config.cache_dir, max_bytes=config.cache_max_mb * MB) if config.cache_max_mb > 0 else ()
        print(
            f"pruned: {len(gone)} cache entries ({sum(e.size for e in gone) / MB:.1f} MB) beyond "
            f"{config.cache_max_mb} MB"
            if config.cache_max_mb > 0
            else "cache: no cap (cache_max_mb = 0)"
        )
        runs = prune_runs(config.report_dir, keep=config.keep_runs)
        print(f"pruned: {len(runs)} old run folder(s) in {config.report_dir} beyond {config.keep_runs}")
    lines = usage(config.cache_dir).lines()
    lines[0] += f" (cap {config.cache_max_mb} MB)" if config.cache_max_mb > 0 else " (no cap)"
    print("\n".join(lines))
    runs = run_folders(config.report_dir)
    print(
        f"{config.report_dir}: {sum(folder_size(r) for r in runs) / MB:.1f} MB in {len(runs)} run folder(s) "
        f"(keep {config.keep_runs})"
    )
    return 0


def _replay(args: argparse.Namespace) -> int:
    from harness.pipeline.hunt import replay_command

    return replay_command(Path(args.finding))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="castguard",
        description="Mixed-precision ONNX accuracy harness. "
        "The accuracy tests run under pytest: pytest --model NAME|PATH.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("convert", add_help=False, help="FP32 -> mixed FP16/BF16 (AutoCast's flags; convert --help)")
    sub.add_parser(
        "tune",
        add_help=False,
        help="the fewest FP32 nodes meeting an error bound (convert's flags + "
        "--max_error, --budget, --plan_path; tune --help)",
    )
    sub.add_parser("models", help="list the bundled models").set_defaults(func=_models)
    goldens = sub.add_parser("goldens", help="write (if missing) or verify FP32 goldens, as pytest --model does")
    add_options(goldens.add_argument)
    goldens.add_argument("--rootdir", default=".", help="project root holding pyproject.toml (default: .)")
    goldens.set_defaults(func=_goldens)
    cache = sub.add_parser("cache", help="show the cache and report folders' disk use; --prune applies the caps")
    cache.add_argument(
        "--prune",
        action="store_true",
        help="evict least recently used cache entries beyond the cap and delete old run folders",
    )
    cache.add_argument(
        "--max-mb",
        type=int,
        default=None,
        metavar="MB",
        help="cap for --prune (default: [tool.castguard] cache_max_mb, else 2048)",
    )
    cache.add_argument(
        "--keep-runs",
        type=int,
        default=None,
        metavar="N",
        help="run folders to keep (default: [tool.castguard] keep_runs, else 3)",
    )
    cache.add_argument("--cache-dir", default=None, metavar="DIR", help="default: .castguard-cache/ under --rootdir")
    cache.add_argument("--report-dir", default=None, metavar="DIR", help="default: castguard-report/ under --rootdir")
    cache.add_argument("--rootdir", default=".", help="project root holding pyproject.toml (default: .)")
    cache.set_defaults(func=_cache)
    replay = sub.add_parser("replay", help="rerun a saved adversarial finding (exit 1 when it still fails)")
    replay.add_argument("finding", metavar="FINDING.npz", help="the .npz an adversarial search saved")
    replay.set_defaults(func=_replay)
    add_history_command(sub)
    add_recheck_command(sub)
    add_merge_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["convert"]:
        from harness.convert.cli import console

        return console(args_list[1:])
    if args_list[:1] == ["tune"]:
        from harness.config import load_table
        from harness.tune.cli import main as tune_main

        return tune_main(args_list[1:], load_table=load_table)
    args = build_parser().parse_args(args_list)
    try:
        code: int = args.func(args)
    except UserError as err:
        print(f"castguard: {err}", file=sys.stderr)
        return 2
    return code
