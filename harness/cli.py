"""``castguard <subcommand>``: the command line outside pytest (no pytest import).

* ``castguard convert ...``: the AutoCast-compatible converter (``harness.convert.cli``), flags verbatim.
* ``castguard tune ...``: accuracy-driven precision selection (``harness.tune.cli``).
* ``castguard models``: the bundled models and their default inputs.
* ``castguard goldens --model X [...]``: write or verify FP32 goldens with the same options as the plugin (exit 0
  when it wrote the golden it was asked for); ``--unused`` lists the goldens no case of the last complete run
  used, ``--prune`` deletes them.
* ``castguard cache [--prune]``: disk use of the cache and of the report folder's run folders; ``--prune``
  evicts least recently used cache entries beyond ``cache_max_mb`` and deletes run folders beyond ``keep_runs``.
* ``castguard replay FINDING.npz``: rerun a saved adversarial finding (exit 1 when it still fails).
* ``castguard history DIR`` / ``castguard recheck REPORT_DIR ...``: nightly regression (``harness.nightly.cli``).
* ``castguard merge SHARD_DIR... --out DIR``: the ``pytest --shard K/N`` runs of one night as one report and
  verdict (``harness.nightly.merge``): the run object of a ``pytest`` run, built from the shards, finished by the
  same ``CastguardRun.finish``.

User errors print one message on stderr and exit 2, without a traceback. Every subcommand takes ``-q``/``-qq``,
``-v`` and ``--color``, before or after its name (:mod:`harness.core.console`).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core.argv import ArgumentParser, quiet_pipe, version_action
from harness.core.console import Console, add_console_options, split_leading
from harness.core.errors import INTERRUPTED_EXIT, UserError
from harness.core.version import __version__
from harness.options import add_options


def _models(_: argparse.Namespace, out: Console) -> int:
    from harness.data.models import bundled_registry

    test_models = bundled_registry()

    for name in test_models.names():
        entry = test_models.MODELS[name]
        inputs = test_models.default_inputs(name)
        ranges = test_models.default_val_ranges(name)
        feed = f"inputs {inputs.name}" if inputs else (f"val-range {ranges}" if ranges else "random [-1,1]")
        out.result(f"{name:20s} {feed:32s} {entry.description}")
    return 0


def _goldens(args: argparse.Namespace, out: Console) -> int:
    from harness.conductor import CastguardRun

    rootdir = Path(args.rootdir).resolve()
    run = CastguardRun.from_options(
        args, invocation_dir=Path.cwd(), rootpath=rootdir, project=rootdir, with_report=False
    )
    if args.unused or args.prune:
        return _unused_goldens(run.config.goldens_dir, run.config.report_dir, prune=args.prune, out=out)
    if run.session is None:
        raise UserError(where="castguard goldens", problem="no model given", fix="pass --model NAME|PATH")
    status = 0
    for name in run.session.models:
        golden, written = run.session.golden(name, allow_update=True)
        out.detail(f"{name}: {len(golden.feeds)} iteration(s); outputs {', '.join(golden.outputs[0]) or '-'}")
        if written is not None:  # what was asked: the golden exists now (review and commit it)
            out.result(f"{name}: golden written: {written}")
            out.info("  review it and commit it with its .json sidecar")
            continue
        outcome = run.session.check_fp32_golden(name)
        out.result(f"{name}: {outcome.status}" + (f"\n{outcome.message}" if outcome.message else ""))
        status = status or (1 if outcome.status in ("fail", "error") else 0)
    return status


def _merge(args: argparse.Namespace, out: Console) -> int:
    """``castguard merge``: the shards' night as the run object, finished as a ``pytest`` run is."""
    from harness.conductor import CastguardRun
    from harness.nightly.cli import merge_nightly
    from harness.nightly.merge import read_night

    here = Path.cwd()
    folder = (here / args.out).resolve()
    night = read_night([Path(d) for d in args.shard_dirs], out=folder)
    run = CastguardRun.from_night(
        night, out=folder, nightly=merge_nightly(args, invocation_dir=here), invocation_dir=here
    )
    try:
        run.start()
        code = run.finish(night.exit_status())
    finally:
        run.close()
    out.result("\n".join(run.terminal_lines()))
    return code


def _unused_goldens(goldens_dir: Path, report_dir: Path, *, prune: bool, out: Console) -> int:
    """``castguard goldens --unused [--prune]``: the goldens no case of the last complete run used."""
    from harness.data.golden_usage import unused_goldens
    from harness.report.io import read_report

    published = report_dir / "report.json"  # the last complete run (harness.report.runs)
    if not published.is_file():
        raise UserError(
            where=published,
            problem="no complete run is recorded here, so nothing says which goldens are used",
            fix="run pytest --model ... over every model once (or pass --report-dir DIR of such a run)",
        )
    report = read_report(published)
    unused = unused_goldens(goldens_dir, {(c.model, c.inputs_id) for c in report.cases})
    verb = "deleted" if prune else "unused"
    for golden in unused:
        for path in golden.files if prune else ():
            path.unlink(missing_ok=True)
        out.result(f"{verb}: {golden.path}")
    out.result(
        f"{len(unused)} golden(s) under {goldens_dir} {'deleted' if prune else 'not used'} by the last complete run "
        f"({report.created}, {len(report.models)} model(s))" + ("" if prune or not unused else "; --prune deletes them")
    )
    return 0


def _cache(args: argparse.Namespace, out: Console) -> int:
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
        out.result(
            f"pruned: {len(gone)} cache entries ({sum(e.size for e in gone) / MB:.1f} MB) beyond "
            f"{config.cache_max_mb} MB"
            if config.cache_max_mb > 0
            else "cache: no cap (cache_max_mb = 0)"
        )
        runs = prune_runs(config.report_dir, keep=config.keep_runs)
        out.result(f"pruned: {len(runs)} old run folder(s) in {config.report_dir} beyond {config.keep_runs}")
    lines = usage(config.cache_dir).lines()
    lines[0] += f" (cap {config.cache_max_mb} MB)" if config.cache_max_mb > 0 else " (no cap)"
    out.result("\n".join(lines))
    runs = run_folders(config.report_dir)
    out.result(
        f"{config.report_dir}: {sum(folder_size(r) for r in runs) / MB:.1f} MB in {len(runs)} run folder(s) "
        f"(keep {config.keep_runs})"
    )
    return 0


def _replay(args: argparse.Namespace, out: Console) -> int:
    """``castguard replay FILE.npz``: exit 1 when the failure reproduces, 0 when not (user errors raise)."""
    from harness.pipeline.hunt import replay

    verdict = replay(Path(args.finding))
    out.info(verdict.comparison.summary())
    out.result(f"replay: {'fail' if verdict.failed else 'pass'} (error/tolerance score {verdict.score:.3g})")
    return 1 if verdict.failed else 0


class _SubParser(ArgumentParser):
    """A subcommand's parser: the console options (-q/-v/--color) come with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.add_help:  # convert and tune (add_help=False here) parse their own
            add_console_options(self)


def _lead_parser() -> argparse.ArgumentParser:
    """The console options given before the subcommand (castguard --help lists them with the rest)."""
    parser = ArgumentParser(prog="castguard", add_help=False)
    add_console_options(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    from harness.nightly.cli import add_history_command, add_merge_command, add_recheck_command

    parser = ArgumentParser(
        prog="castguard",
        description="Mixed-precision ONNX accuracy harness. "
        "The accuracy tests run under pytest: pytest --model NAME|PATH.",
    )
    version_action(parser, __version__)
    add_console_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_SubParser)
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
    goldens.add_argument(
        "--unused",
        action="store_true",
        help="list the goldens that no case of the last complete run (the report folder's report.json) used",
    )
    goldens.add_argument("--prune", action="store_true", help="delete the goldens --unused lists (with their sidecars)")
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
    add_merge_command(sub).set_defaults(func=_merge)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``castguard`` console script; a closed pipe (``| head``) ends it quietly, and Ctrl-C anywhere is one line
    and exit 130 (every file castguard writes is atomic)."""
    try:
        code = quiet_pipe(lambda: _main(list(sys.argv[1:] if argv is None else argv)))
    except KeyboardInterrupt:
        print(
            "castguard: interrupted (Ctrl-C); nothing was left half-written (files already there are whole)",
            file=sys.stderr,
        )
        code = INTERRUPTED_EXIT
    if argv is None:  # the process's own command: its work is done, a late Ctrl-C must not turn it into a crash
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


def _main(args_list: list[str]) -> int:
    given, args_list = split_leading(args_list)  # castguard -q tune ...: the same as castguard tune -q ...
    lead = _lead_parser().parse_args(given)
    if args_list[:1] == ["convert"]:
        from harness.convert.cli import console

        return console(args_list[1:], lead=lead)
    if args_list[:1] == ["tune"]:
        from harness.config import load_table
        from harness.tune.cli import main as tune_main

        return tune_main(args_list[1:], load_table=load_table, lead=lead)
    args = build_parser().parse_args(args_list)
    out = Console.from_args(lead, args)
    try:
        code: int = args.func(args, out)
    except UserError as err:
        out.error(f"castguard: {err}")
        return 2
    return code
