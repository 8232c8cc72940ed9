"""A live line while a long step of a case runs (step name, elapsed); nothing for a fast step."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.config import HarnessConfig
from harness.core.liveline import LiveLine
from harness.pipeline.session import AccuracySession, Case
from harness.sweep import SweepPoint, SweepSpec
from tests.helpers.graphs import mlp_model, save

pytest_plugins = ["pytester"]


def test_a_slow_step_says_it_is_alive_and_a_fast_one_says_nothing() -> None:
    lines: list[str] = []
    live = LiveLine(write=lines.append, after_s=0.05, every_s=0.05)
    with live.step("m [fp16]", "diagnosing"):
        pass
    assert lines == []
    with live.step("m [fp16]", "diagnosing"):
        time.sleep(0.3)
    assert lines and all(line.startswith("castguard: m [fp16]: diagnosing ... ") for line in lines)
    assert lines[-1].endswith(" s")
    count = len(lines)
    time.sleep(0.15)
    assert len(lines) == count  # the line stops with the step


def test_every_step_of_a_case_goes_through_the_live_line(tmp_path: Path) -> None:
    config = HarnessConfig(
        models=(str(save(mlp_model(), tmp_path / "mlp.onnx")),),
        goldens_dir=tmp_path / "g",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        sweep=SweepSpec(precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1]),
    )
    session = AccuracySession.open(config, bundled_dir=tmp_path / "none")
    lines: list[str] = []
    session.settings = replace(session.settings, live=LiveLine(write=lines.append, after_s=0.0, every_s=60.0))
    name = next(iter(session.models))
    session.check_fp32_golden(name)
    session.check_low_precision(Case(name, SweepPoint()))
    steps = [line.split(": ", 2)[2].split(" ... ")[0] for line in lines]
    assert steps[:4] == ["converting", "running on emulate", "judging", "timing"]
    quiet = replace(session.settings, live=None)
    with quiet.step("x", "y"):
        pass  # no live line: nothing to call


def _session(tmp_path: Path, model: Path, lines: list[str], **thresholds: float) -> AccuracySession:
    config = HarnessConfig(
        models=(str(model),),
        goldens_dir=tmp_path / "g",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        sweep=SweepSpec(precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1]),
    )
    session = AccuracySession.open(config, bundled_dir=tmp_path / "none")
    live = LiveLine(write=lines.append, after_s=60.0, every_s=60.0, **thresholds)  # type: ignore[arg-type]
    session.settings = replace(session.settings, live=live)
    session.check_fp32_golden(next(iter(session.models)))
    return session


def test_a_step_whose_estimate_crosses_the_threshold_says_its_cost_before_it_starts(tmp_path: Path) -> None:
    """The failing case of a small model (fp16 cancellation) is diagnosed: with the thresholds lowered to zero its
    judge and diagnosis say their estimated cost (seconds, MB, how estimated, the option that shrinks it) first; at
    the default thresholds the same small model says nothing."""
    from tests.helpers.graphs import cancellation_model

    model = save(cancellation_model(), tmp_path / "cancel model.onnx")
    lines: list[str] = []
    session = _session(tmp_path / "low", model, lines, announce_s=0.0, announce_bytes=0)
    outcome = session.check_low_precision(Case(next(iter(session.models)), SweepPoint(keep_io_types=True)))
    assert outcome.status == "fail" and outcome.record is not None and outcome.record.diagnosis is not None
    said = {line.split(": ", 2)[2].split(" will take")[0]: line for line in lines}
    assert set(said) == {"judging", "diagnosing"}  # emulate claims no speed: no timing
    assert "forwards of" in said["diagnosing"] and "skip it: --no-diagnose" in said["diagnosing"]
    assert "--input-shapes" not in said["diagnosing"]  # x is declared [1, 16]: no smaller shape would be accepted
    assert said["judging"].startswith("castguard: cancel model") and " MB (" in said["judging"]
    quiet: list[str] = []
    session = _session(tmp_path / "default", model, quiet)
    assert (
        session.check_low_precision(Case(next(iter(session.models)), SweepPoint(keep_io_types=True))).status == "fail"
    )
    assert quiet == []


def test_a_deploy_size_output_crosses_the_default_threshold(tmp_path: Path) -> None:
    """A case whose golden holds 8x512x32000 fp32 logits (0.5 GB; a zero-stride view here, nothing allocated): its
    judge estimate crosses the default 1 GB (the golden's and the case's copies of the logits), and is announced."""
    import numpy as np

    from harness.pipeline.caserun import CaseEnv
    from harness.pipeline.estimate import judge_estimate
    from harness.pipeline.steps.convert import convert_step
    from harness.pipeline.steps.execute import execute_step

    lines: list[str] = []
    session = _session(tmp_path, save(mlp_model(), tmp_path / "mlp.onnx"), lines)
    run = session.start_case(Case(next(iter(session.models)), SweepPoint()))
    env = CaseEnv(settings=session.settings, cache=session.cache)
    run = execute_step(convert_step(run, env), env)
    small = judge_estimate(run)
    assert small is not None and small.peak_bytes < LiveLine(write=lines.append).announce_bytes
    logits = np.broadcast_to(np.float32(0.5), (8, 512, 32000))
    big = replace(run, ctx=replace(run.context, golden=replace(run.context.golden, outputs=[{"logits": logits}])))
    found = judge_estimate(big)
    assert found is not None and found.peak_bytes == 2 * logits.nbytes
    assert LiveLine(write=lines.append).announce("m [c]", seconds=found.seconds, peak_bytes=found.peak_bytes, text="x")
    assert lines == ["castguard: m [c]: x"]


def test_pytest_model_shows_the_live_line_and_the_announcement_unless_quiet(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the plugin (``pytest --model``): the live line reaches pytest's terminal although castguard's
    pytest_configure may run before the terminal reporter exists; with the thresholds at zero every long step
    shows, the judge's cost first; under -q nothing does."""
    import functools

    import harness.plugin.terminal

    monkeypatch.setattr(
        harness.plugin.terminal, "LiveLine", functools.partial(LiveLine, after_s=0.0, every_s=60.0, announce_s=0.0)
    )
    save(mlp_model(), pytester.path / "mlp.onnx")
    args = ("-p", "no:cacheprovider", "--model", "mlp.onnx", "--precision", "fp16", "--data-max", "512")
    result = pytester.runpytest_inprocess(*args, "--exclude-ops", "none", "--keep-io-types", "false")
    lines = [line for line in result.outlines if line.startswith("castguard: mlp [")]
    judging = [i for i, line in enumerate(lines) if ": judging will take about " in line]
    assert judging and ": judging ... " in lines[judging[0] + 1] and any(": converting ... " in x for x in lines)
    quiet = pytester.runpytest_inprocess(*args, "--exclude-ops", "none", "--keep-io-types", "false", "-q")
    assert not [line for line in quiet.outlines if line.startswith("castguard: mlp [")]
