"""Runner plugins run in a child process with a time-out (issue 33.10), and are easy to write (issue 34.7).

The plugins are written into the example package installed with a real dist-info on sys.path
(tests/helpers/plugin_dist.py): a hang, a segfault, ``os._exit``, an exception and an object array each fail
their own call with the runner's last words, and the next call runs; a subclass written from the README (class
attributes only, no ``__init__``) builds, and takes runner options.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.convert import ConvertOptions, convert
from harness.core.errors import RunnerError, UserError
from harness.runners import make_runner
from harness.runners.isolated import IsolatedRunner, fit_timeout
from harness.runners.registry import registered
from tests.helpers.convert_builders import F32, model, node, vi
from tests.helpers.faulty_runners import ENTRY_POINTS, PLUGINS
from tests.helpers.plugin_dist import PACKAGE, install_into


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    registered.cache_clear()
    folder = install_into(tmp_path / "site with space", entry_points=ENTRY_POINTS, extra_source=PLUGINS)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)
    yield folder
    registered.cache_clear()


def low_model() -> onnx.ModelProto:
    fp32 = model(
        [node("Relu", ["x"], ["h"], "relu"), node("Sigmoid", ["h"], ["y"], "sig")],
        [vi("x", F32, [2, 3])],
        [vi("y", F32, [2, 3])],
        [],
    )
    return convert(fp32, options=ConvertOptions(), magnitudes=None).model


FEED = {"x": np.array([[-1, 0.5, 2], [3, -4, 1e-3]], np.float16)}


def expected(scale: float = 1.0) -> np.ndarray:
    return scale / (1 + np.exp(-np.maximum(FEED["x"].astype(np.float32), 0)))


def test_a_readme_subclass_builds_from_its_class_attributes_and_runs_in_a_child(plugins: Path) -> None:
    runner = make_runner("readme", low_model())
    assert isinstance(runner, IsolatedRunner)
    result = runner.run([FEED, FEED])
    assert result.runner == "readme" and result.rounds_low_precision
    assert len(result.outputs) == 2 and result.outputs[1]["y"].dtype == np.float16
    np.testing.assert_allclose(result.outputs[0]["y"], expected(), atol=1e-3)


def test_runner_options_reach_the_plugin_in_process_and_in_the_child(plugins: Path) -> None:
    child = make_runner("readme", low_model(), options={"scale": "2"}).run([FEED])
    np.testing.assert_allclose(child.outputs[0]["y"], expected(2.0), atol=2e-3)
    with make_runner("readme", low_model(), options={"scale": 3}, isolate=False) as runner:
        assert runner.runner_options == {"scale": 3} and runner.name == "readme" and runner.rounds_low_precision
        np.testing.assert_allclose(runner.infer(FEED)["y"], expected(3.0), atol=3e-3)


def test_builtin_runners_stay_in_process_and_refuse_options() -> None:
    registered.cache_clear()
    assert not isinstance(make_runner("emulate", low_model()), IsolatedRunner)
    with pytest.raises(UserError, match="takes no runner options"):
        make_runner("emulate", low_model(), options={"device": "0"})


def test_a_plugin_that_declares_isolated_false_runs_in_process(plugins: Path) -> None:
    assert not isinstance(make_runner("trusted", low_model()), IsolatedRunner)


def test_a_hanging_plugin_times_out_with_its_last_words(plugins: Path) -> None:
    start = time.monotonic()
    with pytest.raises(RunnerError, match=r"(?s)runner hang .*no answer within 20 s.*never answers.*runner-timeout"):
        make_runner("hang", low_model(), timeout_s=20).run([FEED])  # room for the child's imports on a busy machine
    assert time.monotonic() - start < 90  # bounded by the time-out, not by the plugin's sleep(600)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("segv", r"crashed with SIGSEGV.*touching freed memory"),
        ("exit", r"exited with status 3.*the driver gave up"),
        ("raises", r"raised ValueError: the device said no"),
        ("objects", r"object array for output 'y'"),
    ],
)
def test_a_crashing_plugin_is_that_calls_error_and_the_next_call_runs(plugins: Path, name: str, words: str) -> None:
    with pytest.raises(RunnerError, match=f"(?s){words}"):
        make_runner(name, low_model(), timeout_s=120).run([FEED])
    after = make_runner("readme", low_model(), timeout_s=120).run([FEED])  # this process is still fine
    np.testing.assert_allclose(after.outputs[0]["y"], expected(), atol=1e-3)


def test_the_default_time_out_grows_with_the_measured_forward() -> None:
    small = fit_timeout(low_model(), [FEED], model_dir=None)
    assert 60 <= small < 120
    assert fit_timeout(low_model(), [FEED] * 50, model_dir=None) > small


def test_runner_options_parse_and_are_checked(tmp_path: Path) -> None:
    from harness.config import HarnessConfig
    from harness.runners.options import merge_options, options_for, parse_runner_options

    table = parse_runner_options(["readme:scale=2", "readme:device = cuda:1", "other:k=v"], where="--runner-option")
    assert options_for(table, "readme") == {"scale": "2", "device": "cuda:1"} and options_for(table, "x") == {}
    toml = parse_runner_options({"readme": {"scale": 3, "fast": True}}, where="[tool.castguard] runner_options")
    assert options_for(merge_options(table, toml), "readme") == {"scale": 3, "device": "cuda:1", "fast": True}
    for bad in (["readme"], ["readme:scale"], [":k=v"], {"readme": 3}, {"readme": {"k": [1]}}):
        with pytest.raises(UserError, match="runner"):
            parse_runner_options(bad, where="--runner-option")
    with pytest.raises(UserError, match="castguard's own runner 'emulate' takes no runner options"):
        HarnessConfig.from_sources(
            cli={"castguard_runner_options": ["emulate:x=1"]}, table={}, rootdir=tmp_path, invocation_dir=tmp_path
        )
    with pytest.raises(UserError, match="expected seconds > 0"):
        HarnessConfig.from_sources(cli={}, table={"runner_timeout": 0}, rootdir=tmp_path, invocation_dir=tmp_path)


def test_the_diagnosis_runs_the_plugin_as_the_case_ran_it(plugins: Path) -> None:
    """A failing case's fix is verified on its runner with the same runner options and time-out."""
    from harness.diagnose.verify import CaseSetup, case_bound
    from harness.judge.tolerances import TolerancePolicy

    feed32 = {"x": FEED["x"].astype(np.float32)}
    fp32 = model(
        [node("Relu", ["x"], ["h"], "relu"), node("Sigmoid", ["h"], ["y"], "sig")],
        [vi("x", F32, [2, 3])],
        [vi("y", F32, [2, 3])],
        [],
    )
    setup = CaseSetup(
        model=fp32,
        options=ConvertOptions(),
        magnitudes=None,  # type: ignore[arg-type]
        feeds=[feed32],
        goldens=[{"y": expected()}],
        bound=case_bound(precision="fp16", policy=TolerancePolicy()),
        use_magnitudes=False,
        runner="readme",
        runner_options=(("readme", (("scale", "2"),)),),
        runner_timeout=120,
    )
    out = setup.run(low_model())
    np.testing.assert_allclose(out[0]["y"], expected(2.0), atol=2e-3)
