"""A live line while a long step of a case runs (step name, elapsed); nothing for a fast step."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from harness.config import HarnessConfig
from harness.core.liveline import LiveLine
from harness.pipeline.session import AccuracySession, Case
from harness.sweep import SweepPoint, SweepSpec
from tests.helpers.graphs import mlp_model, save


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
