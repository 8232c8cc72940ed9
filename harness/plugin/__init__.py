"""pytest wiring for castguard: options, configuration, suite collection, parametrization, the report. Nothing else.

Loaded through the ``pytest11`` entry point. With ``--model`` and no explicit test paths, pytest collects
only the packaged accuracy suite (``harness/plugin/suite/test_castguard.py``; with ``-m adversarial`` also the
Hypothesis search ``harness/plugin/suite/test_adversarial.py``), so ``pytest --model mnist.onnx`` works in any
repository. The work is done by :mod:`harness.run.session` (checks) and :mod:`harness.report.collect` (the report); the
hooks only wire them in:

* ``pytest_configure``: config + :class:`AccuracySession` + :class:`ReportSession` into ``config.stash``;
* ``pytest_generate_tests``: ``castguard_model`` x models, ``castguard_case`` x (models x sweep cases),
  ``castguard_tuned_case`` x (models x precisions) with ``--tune``;
* ``pytest_runtest_makereport``: a suite test's :class:`CaseRecord` (left by :func:`castguard_record`)
  is settled (xfail/xpass) and added to this process's case file;
* ``pytest_collection_finish`` / ``pytest_xdist_node_collection_finished``: how many sweep cases this run selected;
* ``pytest_sessionfinish`` (the controller under xdist): build this run's report from its own run folder
  (interrupted when pytest's exit status says so); the nightly run (:class:`harness.nightly.run.NightlyRun`:
  --baseline/--history) decides its verdict first, then renders its sections; the report is written (a complete
  one also published), old run folders pruned, the cache capped; a regression under --fail-on-regression sets
  the exit status;
* ``pytest_terminal_summary``: print where the report is (or that the run was interrupted) and what regressed;
* a suite test id pasted back as an argument (``::test_low_precision[...]``) is pointed at the packaged suite.

Under xdist each worker is pinned to its own GPU when several are visible (:mod:`harness.plugin.xdist`).
With ``--shard K/N`` the owning process registers :mod:`harness.plugin.shards` (start marker, idle shards, the
shard's terminal line); a shard refuses the nightly options (``castguard merge`` judges the whole night).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.options import add_nightly_options, add_options, given_options

if TYPE_CHECKING:  # heavy modules load in pytest_configure, not at plugin import
    from harness.run.session import AccuracySession
    from harness.config import HarnessConfig
    from harness.nightly.run import NightlyRun
    from harness.report import CaseRecord, Provenance
    from harness.report.collect import FinishedReport, ReportSession
    from harness.plugin.shards import ShardPlugin

pytest_plugins = ("harness.plugin.fixture",)   # the `castguard` fixture for users' own tests (issue 24.1)
CONFIG_KEY: pytest.StashKey[HarnessConfig] = pytest.StashKey()
SESSION_KEY: pytest.StashKey[AccuracySession] = pytest.StashKey()
REPORT_KEY: pytest.StashKey[ReportSession] = pytest.StashKey()
FINISHED_KEY: pytest.StashKey[FinishedReport] = pytest.StashKey()
RECORD_KEY: pytest.StashKey[CaseRecord] = pytest.StashKey()
NIGHTLY_KEY: pytest.StashKey[NightlyRun] = pytest.StashKey()
PROJECT_KEY: pytest.StashKey[Path] = pytest.StashKey()   # castguard's project folder (harness.config.find_project)
SUITE_FILE = Path(__file__).resolve().parent / "suite" / "test_castguard.py"
ADVERSARIAL_FILE = SUITE_FILE.with_name("test_adversarial.py")   # opt-in: -m adversarial (minutes per model)
TUNED_FILE = SUITE_FILE.with_name("test_tuned.py")               # opt-in: --tune / [tool.castguard] tune
PLANNED_KEY: pytest.StashKey[int] = pytest.StashKey()
SHARD_KEY: pytest.StashKey[ShardPlugin] = pytest.StashKey()
EVICTED_KEY: pytest.StashKey[str] = pytest.StashKey()
RUN_ID_KEY = "castguard_run_id"      # the controller's run id, handed to xdist workers in their workerinput
CASE_TESTS = ("test_low_precision[", "test_tuned[")   # the suite tests that are sweep cases (report records)


SUITE_TESTS = {"test_fp32_golden": SUITE_FILE, "test_low_precision": SUITE_FILE,
               "test_adversarial": ADVERSARIAL_FILE,
               "test_tuned": TUNED_FILE}
BENCHMARKS_KEY: pytest.StashKey[bool] = pytest.StashKey()


def suite_arg(arg: str, *, invocation_dir: Path) -> str:
    """A test id pytest printed for the packaged suite (``::test_low_precision[mnist-fp16-...]``, or with the
    file's path) pasted back as an argument: pointed at the suite file. Other arguments are left alone."""
    path, sep, rest = arg.partition("::")
    name = rest.split("[", 1)[0]
    if not sep or name not in SUITE_TESTS or (path and (invocation_dir / path).is_file()
                                              and Path(path).name != SUITE_TESTS[name].name):
        return arg
    return f"{SUITE_TESTS[name]}::{rest}"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("castguard", "castguard: mixed-precision ONNX accuracy")
    add_options(group.addoption)
    add_nightly_options(group.addoption)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``--model PATH`` (space form) must not move pytest's rootdir: see :mod:`harness.plugin.rootdir`."""
    from harness.plugin.rootdir import correct_rootdir

    correct_rootdir(early_config, args)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")   # set by pytest-xdist on its worker processes


def pytest_configure(config: pytest.Config) -> None:
    from harness.run.session import AccuracySession
    from harness.config import HarnessConfig, find_project, load_table
    from harness.errors import UserError
    from harness.plugin.xdist import apply_pin
    from harness.data.models import bundled_models_dir
    from harness.nightly.run import NightlyRun, options_from
    from harness.report.collect import ReportSession, worker_name

    config.addinivalue_line("markers", "adversarial: castguard's Hypothesis search for low-precision failures")
    # pytest-benchmark (a dependency) creates ./.benchmarks when it configures; remove it at the end if it was
    # not there before and stayed empty, so a castguard run leaves no empty folder in the user's project
    config.stash[BENCHMARKS_KEY] = (config.invocation_params.dir / ".benchmarks").exists()
    apply_pin(worker_name(getattr(config, "workerinput", None)), os.environ)
    given = given_options(config.option)
    try:
        project = find_project(config.invocation_params.dir, fallback=config.rootpath)
        config.stash[PROJECT_KEY] = project
        harness_config = HarnessConfig.from_sources(cli=given, table=load_table(project),
                                                    rootdir=project, invocation_dir=config.invocation_params.dir)
        nightly = options_from(config.option, invocation_dir=config.invocation_params.dir)
        workerinput = getattr(config, "workerinput", None)
        run_id = workerinput.get(RUN_ID_KEY) if workerinput else None   # absent when the controller runs no model
        report = ReportSession(report_dir=harness_config.report_dir, worker=worker_name(workerinput),
                               run_id=str(run_id) if run_id else None, keep_runs=harness_config.keep_runs)
        session = AccuracySession(harness_config, bundled_dir=bundled_models_dir(),
                                  strict_provenance=nightly.strict_provenance,
                                  output_dir=report.run_dir) if harness_config.models else None
        if session is not None and session.shard_work is not None and nightly.active:
            raise UserError(where="--shard", problem="a shard is one part of the night: comparing it with a "
                            "baseline would call the other shards' cases missing",
                            fix="drop --baseline/--history/--fail-on-regression here and give them to "
                                "`castguard merge SHARD_DIR... --out DIR`, which compares the whole night once")
        if session is not None and nightly.active and not _is_worker(config):
            config.stash[NIGHTLY_KEY] = NightlyRun(nightly)
    except UserError as err:
        raise pytest.UsageError(str(err)) from None
    config.stash[CONFIG_KEY] = harness_config
    if session is not None:
        config.stash[SESSION_KEY] = session
        config.stash[REPORT_KEY] = report
        if not _is_worker(config):
            report.start()
            if session.shard_work is not None:
                _start_shard(config, session)
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            adversarial = "adversarial" in (config.option.markexpr or "")
            config.args = [str(SUITE_FILE), *([str(TUNED_FILE)] if harness_config.tune else []),
                           *([str(ADVERSARIAL_FILE)] if adversarial else [])]
        else:
            config.args = [suite_arg(arg, invocation_dir=config.invocation_params.dir) for arg in config.args]


def _start_shard(config: pytest.Config, session: AccuracySession) -> None:
    """--shard K/N: write the start marker and register the shard's hooks (:mod:`harness.plugin.shards`)."""
    from harness.plugin.shards import ShardPlugin
    from harness.run.shard_run import shard_info

    assert session.shard_work is not None
    plugin = ShardPlugin(session.shard_work, shard_info(session.config, session.shard_work),
                         suite_files=tuple(SUITE_TESTS.values()))
    config.stash[REPORT_KEY].mark_shard(plugin.info, provenance=_provenance(config))
    config.stash[SHARD_KEY] = plugin
    config.pluginmanager.register(plugin, "castguard-shard")


def _provenance(config: pytest.Config) -> Provenance:
    from hypothesis import settings

    from harness.report import collect_provenance

    seed = config.getoption("hypothesis_seed", None)   # a nightly run's seed, recorded to replay it
    profile = settings.get_current_profile_name() + (f" (seed {seed})" if seed is not None else "")
    return collect_provenance(hypothesis_profile=profile, runners=config.stash[CONFIG_KEY].runners,
                              project_dir=config.stash.get(PROJECT_KEY, config.rootpath))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """pytest-xdist, controller: every worker writes into this run's folder."""
    reporter = node.config.stash.get(REPORT_KEY, None)   # type: ignore[attr-defined]
    if reporter is not None:
        node.workerinput[RUN_ID_KEY] = reporter.run_id   # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """pytest-xdist, controller: the number of sweep cases this run selected (every worker collects them all)."""
    config = node.config   # type: ignore[attr-defined]
    config.stash[PLANNED_KEY] = sum(is_case(i) for i in ids)


def is_case(nodeid: str) -> bool:
    return any(name in nodeid for name in CASE_TESTS)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not _is_worker(session.config) and session.items:
        session.config.stash[PLANNED_KEY] = sum(is_case(item.nodeid) for item in session.items)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    session = metafunc.config.stash.get(SESSION_KEY, None)
    if "castguard_model" in metafunc.fixturenames:
        names = list(session.models) if session else []
        metafunc.parametrize("castguard_model", names, ids=names)
    if "castguard_case" in metafunc.fixturenames:
        cases = session.cases if session else []
        metafunc.parametrize("castguard_case", cases, ids=[c.id for c in cases])
    if "castguard_tuned_case" in metafunc.fixturenames:
        tuned = session.tuned_cases if session else []
        metafunc.parametrize("castguard_tuned_case", tuned, ids=[c.id for c in tuned])


@pytest.fixture
def castguard_session(request: pytest.FixtureRequest) -> AccuracySession:
    """The accuracy session of this run (only with --model)."""
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("castguard accuracy tests need --model NAME|PATH")
    return session


@pytest.fixture
def castguard_record(request: pytest.FixtureRequest) -> Callable[[CaseRecord], None]:
    """Call it with the test's CaseRecord; the record goes into the report once pytest has judged the test."""
    def record(case_record: CaseRecord) -> None:
        request.node.stash[RECORD_KEY] = case_record
    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                            pytest.TestReport]:
    report = yield
    record = item.stash.get(RECORD_KEY, None)
    reporter = item.config.stash.get(REPORT_KEY, None)
    if report.when == "call" and record is not None and reporter is not None:
        from harness.report.collect import settle

        strict_xpass = report.failed and str(report.longrepr).startswith("[XPASS(strict)]")
        reporter.add(settle(record, expected_failure=hasattr(report, "wasxfail") or strict_xpass))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    reporter = session.config.stash.get(REPORT_KEY, None)
    if reporter is None or _is_worker(session.config):
        return
    harness_config = session.config.stash[CONFIG_KEY]
    planned = session.config.stash.get(PLANNED_KEY, None)
    interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
    shard = session.config.stash.get(SHARD_KEY, None)   # its own sessionfinish (tryfirst) fixed an idle exit 5
    report = reporter.build(provenance=_provenance(session.config), interrupted=interrupted,
                            planned_cases=planned if planned is not None or shard is None else shard.work.case_count,
                            shard=None if shard is None else shard.finished(int(session.exitstatus)))
    if report is None:
        return
    nightly = session.config.stash.get(NIGHTLY_KEY, None)
    if nightly is not None:
        nightly.decide(report)                          # the verdict first (harness.nightly.rules) ...
    extra_md, extra_html = nightly.sections() if nightly is not None else ([], [])   # ... then its rendering
    session.config.stash[FINISHED_KEY] = reporter.write(report, extra_md=extra_md, extra_html=extra_html)
    from harness.run.cache_size import evict_note

    session.config.stash[EVICTED_KEY] = evict_note(harness_config.cache_dir, max_mb=harness_config.cache_max_mb)
    if nightly is not None and nightly.exit_code and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED   # the verdict of harness.nightly.rules, never raised


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(BENCHMARKS_KEY, True) or _is_worker(config):
        return
    folder = config.invocation_params.dir / ".benchmarks"
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    report = config.stash.get(REPORT_KEY, None)
    if report is not None:
        report.close()          # a run that ended before its report (a usage error, a crash) unlocks its folder


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    finished = terminalreporter.config.stash.get(FINISHED_KEY, None)
    if finished is not None:
        terminalreporter.write_sep("-", "castguard sweep report")
        here = terminalreporter.config.invocation_params.dir
        terminalreporter.write_line(finished.summary_line(relative_to=here))
        if finished.pruned:
            terminalreporter.write_line(f"castguard: deleted {finished.pruned} old run folder(s) (keep_runs)")
        from harness.report.trt_view import terminal_lines

        for line in terminal_lines(finished.report):     # the TensorRT build check (issue 17)
            terminalreporter.write_line(line)
    evicted = terminalreporter.config.stash.get(EVICTED_KEY, "")
    if evicted:
        terminalreporter.write_line(evicted)
    session = terminalreporter.config.stash.get(SESSION_KEY, None)
    if session is not None and not _is_worker(terminalreporter.config):
        for name, loaded in session.models.items():   # what the inputs were, on every run (issue 9)
            terminalreporter.write_line(f"castguard inputs of {name}: " + "; ".join(loaded.input_lines))
    nightly = terminalreporter.config.stash.get(NIGHTLY_KEY, None)
    if nightly is not None:
        terminalreporter.write_sep("-", "castguard nightly regression")
        for line in nightly.terminal_lines():
            terminalreporter.write_line(line)
