"""pytest wiring for castguard: options, configuration, suite collection and parametrization. Nothing else.

Loaded through the ``pytest11`` entry point. With ``--model`` and no explicit test paths, pytest collects
only the packaged accuracy suite (``harness/suite/test_castguard.py``), so ``pytest --model mnist.onnx``
works in any repository. The work is done by :mod:`harness.accuracy`; the hooks only wire it in.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.options import add_options, given_options

if TYPE_CHECKING:  # heavy modules load in pytest_configure, not at plugin import
    from harness.accuracy import AccuracySession
    from harness.config import HarnessConfig

CONFIG_KEY: pytest.StashKey[HarnessConfig] = pytest.StashKey()
SESSION_KEY: pytest.StashKey[AccuracySession] = pytest.StashKey()
SUITE_FILE = Path(__file__).resolve().parent / "suite" / "test_castguard.py"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("castguard", "castguard: mixed-precision ONNX accuracy").addoption)


def pytest_configure(config: pytest.Config) -> None:
    from harness.accuracy import AccuracySession
    from harness.config import HarnessConfig, load_table
    from harness.errors import UserError
    from harness.models import bundled_models_dir

    try:
        harness_config = HarnessConfig.from_sources(cli=given_options(config.option), table=load_table(config.rootpath),
                                                    rootdir=config.rootpath, invocation_dir=config.invocation_params.dir)
        session = AccuracySession(harness_config, bundled_dir=bundled_models_dir()) if harness_config.models else None
    except UserError as err:
        raise pytest.UsageError(str(err)) from None
    config.stash[CONFIG_KEY] = harness_config
    if session is not None:
        config.stash[SESSION_KEY] = session
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            config.args = [str(SUITE_FILE)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    session = metafunc.config.stash.get(SESSION_KEY, None)
    if "castguard_model" in metafunc.fixturenames:
        names = list(session.models) if session else []
        metafunc.parametrize("castguard_model", names, ids=names)
    if "castguard_case" in metafunc.fixturenames:
        cases = session.cases if session else []
        metafunc.parametrize("castguard_case", cases, ids=[c.id for c in cases])


@pytest.fixture
def castguard_session(request: pytest.FixtureRequest) -> AccuracySession:
    """The accuracy session of this run (only with --model)."""
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("castguard accuracy tests need --model NAME|PATH")
    return session

