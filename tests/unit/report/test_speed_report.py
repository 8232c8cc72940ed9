"""Speed next to accuracy: report fields, the error-vs-speedup front and plot, the fastest passing case, the
nightly ``speedup`` rule, and the CPU runners' reason for claiming none. Timing runs on CPU with a fake clock."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from harness.config import HarnessConfig
from harness.core.errors import UserError
from harness.nightly.comparison import judge
from harness.nightly.rules import SPEEDUP_FLOOR, parse_rule
from harness.pipeline.session import AccuracySession, Case
from harness.pipeline.speed import SpeedPair, measure_speed, time_pair
from harness.report import CaseRecord, Report
from harness.report.pareto import best_passing
from harness.report.plots import error_vs_speedup_png
from harness.report.render_html import render_html
from harness.report.render_md import render_markdown
from harness.report.serde import record_from_dict, record_to_dict
from harness.report.speed import fastest_passing, speed_front
from harness.report.view import report_view
from harness.runners import make_runner
from harness.runners.base import Runner
from harness.runners.timing import TimingConfig
from harness.sweep import SweepPoint, SweepSpec
from tests.helpers.graphs import mlp_model, save
from tests.helpers.report_samples import PROVENANCE, output_stats, record_for


def _timed(data_max: float, error: float, speedup: float, status: str = "pass", precision: str = "fp16") -> CaseRecord:
    base = record_for(SweepPoint(precision=precision, data_max=data_max))
    return dataclasses.replace(
        base,
        status=status,
        runner="ort-cuda",
        outputs=(output_stats("y", error, passed=status == "pass"),),
        latency_ms=1.0 / speedup,
        fp32_latency_ms=1.0,
        speedup=speedup,
    )


CASES = (
    _timed(8.0, 1e-4, 0.95),
    _timed(512.0, 3e-4, 1.30),
    _timed(math.inf, 2e-3, 1.25),
    _timed(512.0, 5e-2, 1.60, status="fail", precision="bf16"),
)


def test_speed_fields_round_trip_through_report_json() -> None:
    record = CASES[1]
    data = json.loads(json.dumps(record_to_dict(record)))
    assert (data["latency_ms"], data["fp32_latency_ms"], data["speedup"]) == (pytest.approx(1 / 1.3), 1.0, 1.3)
    assert record_from_dict(data) == record
    old = {k: v for k, v in data.items() if k not in ("latency_ms", "fp32_latency_ms", "speedup", "speed_note")}
    assert record_from_dict(old).speedup is None  # reports written before the fields still load


def test_front_and_fastest_passing_case() -> None:
    front = speed_front(CASES)
    assert [c.speedup for c in front] == [1.30, 0.95]  # 1.25 at 2e-3 is beaten by 1.30 at 3e-4; 1.60 fails
    assert fastest_passing(CASES) is CASES[1]
    assert best_passing(CASES) is CASES[1]  # the sweep's best case is the fastest that passes


def test_report_shows_the_speed_table_plot_and_why_cpu_cases_claim_none() -> None:
    cpu = dataclasses.replace(
        record_for(SweepPoint(precision="fp16", data_max=8.0, keep_io_types=True)),
        speed_note="emulate computes in fp32",
    )
    report = Report.build((*CASES, cpu), created="2026-11-22T00:00:00+00:00", provenance=PROVENANCE)
    md = render_markdown(report_view(report))
    assert "| latency ms | FP32 ms | speedup |" in md and "1.30×" in md and "front" in md
    assert "device-resident" in md  # the claimed figures say how they were timed
    assert "No speed claimed: emulate computes in fp32." in md
    html = render_html(report_view(report))
    assert "<h3>Speed</h3>" in html and "error vs measured speedup" in html
    png = error_vs_speedup_png(CASES, title="m")
    assert png.startswith(b"\x89PNG") and len(png) > 5000


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (1.30, 1.10, True),  # -15 %
        (1.30, 1.20, None),  # -7.7 %: within the rule
        (1.30, 1.50, False),  # an improvement
        (0.30, 0.26, None),  # -13 % but below the noise floor
    ],
)
def test_nightly_speedup_rule(before: float, after: float, expected: bool | None) -> None:
    assert abs(0.30 - 0.26) < SPEEDUP_FLOOR
    found = judge(
        dataclasses.replace(CASES[1], speedup=before),
        dataclasses.replace(CASES[1], speedup=after),
        parse_rule("speedup:-10%"),
    )
    assert (None if found is None else found[0]) is expected


def test_speedup_rule_points_the_right_way() -> None:
    with pytest.raises(UserError, match="would flag improvements"):
        parse_rule("speedup:+10%")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.001  # every reading advances 1 ms: each timed call lasts exactly 1 ms
        return self.now


def test_time_pair_on_cpu_runners_with_a_fake_clock() -> None:
    """The measuring path itself (both models, interleaved) runs on CPU runners; the fake clock makes the
    numbers exact. Whether a runner may *claim* the speed is speed_claim's business, tested apart."""
    model = mlp_model()
    feed = {"x": np.ones((1, 8), np.float32)}
    with make_runner("ort", model) as low, make_runner("ort", model) as fp32:
        speed = time_pair(low, fp32, feed, feed, config=TimingConfig(warmup=1, repeats=3, rounds=2, clock=Clock()))
    assert speed.latency_ms == pytest.approx(1.0) and speed.fp32_latency_ms == pytest.approx(1.0)
    assert speed.speedup == pytest.approx(1.0) and speed.note == ""


def test_cpu_runners_record_why_they_claim_no_speed(tmp_path: Path) -> None:
    config = HarnessConfig(
        models=(str(save(mlp_model(), tmp_path / "mlp.onnx")),),
        goldens_dir=tmp_path / "g",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        sweep=SweepSpec(
            precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1], keep_io_types=(True,)
        ),
    )
    session = AccuracySession.open(config, bundled_dir=tmp_path / "none")
    name = next(iter(session.models))
    session.check_fp32_golden(name)
    outcome = session.check_low_precision(Case(name, SweepPoint(keep_io_types=True)))
    assert outcome.record is not None and outcome.record.speedup is None
    assert outcome.record.speed_note.startswith("emulate computes in fp32")
    model = mlp_model()
    pair = SpeedPair("ort", model, model, [], providers=("CPUExecutionProvider",))
    assert measure_speed(pair, config=TimingConfig(clock=Clock())).note.startswith("ORT's CPU provider")


class _Timed(Runner):
    """A runner whose calls cost known times on a manual clock: `compute` ms on the device, `copy` ms of host
    copies on top for a call with numpy in and out; `bound=False`: it has no device call (as TensorRT's)."""

    def __init__(self, clock: list[float], *, compute: float, copy: float, bound: bool = True) -> None:
        super().__init__(mlp_model(), name="fake", rounds_low_precision=True)
        self.clock, self.compute, self.copy, self.bound = clock, compute, copy, bound

    def activate_impl(self) -> None:
        pass

    def deactivate_impl(self) -> None:
        pass

    def infer_impl(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.clock[0] += (self.compute + self.copy) / 1000
        return {}

    def device_call(self, feed: dict[str, np.ndarray]) -> Callable[[], object] | None:
        if not self.bound:
            return None

        def call() -> None:
            self.clock[0] += self.compute / 1000

        return call


def test_the_claimed_speedup_is_device_resident_and_the_copies_do_not_cancel() -> None:
    """8.7 ms vs 7.1 ms on the device, plus 10 ms of copies each: 1.23x resident, 1.09x end to end (issue 31)."""
    now = [0.0]
    low, fp32 = _Timed(now, compute=7.1, copy=10.0), _Timed(now, compute=8.7, copy=10.0)
    speed = time_pair(low, fp32, {}, {}, config=TimingConfig(warmup=1, repeats=3, rounds=2, clock=lambda: now[0]))
    assert speed.basis == "device-resident"
    assert speed.latency_ms == pytest.approx(7.1) and speed.fp32_latency_ms == pytest.approx(8.7)
    assert speed.speedup == pytest.approx(8.7 / 7.1)
    assert speed.e2e_latency_ms == pytest.approx(17.1) and speed.e2e_speedup == pytest.approx(18.7 / 17.1)
    plain = time_pair(
        _Timed(now, compute=7.1, copy=10.0, bound=False),
        _Timed(now, compute=8.7, copy=10.0),
        {},
        {},
        config=TimingConfig(warmup=0, repeats=2, rounds=1, clock=lambda: now[0]),
    )
    assert plain.basis == "end to end" and plain.speedup == pytest.approx(18.7 / 17.1)


def test_io_binding_on_the_cpu_provider_leaves_the_outputs_in_place() -> None:
    model = mlp_model()
    feed = {"x": np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)}
    with make_runner("ort", model) as runner:
        call = runner.device_call(feed)
        assert call is not None
        binding = call()
        (value,) = binding.get_outputs()  # type: ignore[attr-defined]
        assert value.device_name().lower() == "cpu"
        expected = runner.infer(feed)
        np.testing.assert_array_equal(value.numpy(), next(iter(expected.values())))
        assert call() is binding  # bound once: later calls reuse the same device buffers


def test_report_shows_both_speeds_and_says_which_is_which() -> None:
    record = dataclasses.replace(
        CASES[1],
        latency_ms=7.1,
        fp32_latency_ms=8.7,
        speedup=1.225,
        speed_basis="device-resident",
        e2e_latency_ms=17.1,
        e2e_fp32_latency_ms=18.5,
        e2e_speedup=1.08,
    )
    assert record_from_dict(json.loads(json.dumps(record_to_dict(record)))) == record
    report = Report.build((record,), created="2026-11-22T00:00:00+00:00", provenance=PROVENANCE)
    md = render_markdown(report_view(report))
    assert "device-resident" in md and "host copies included" in md
    assert "1.23×" in md and "17.1 / 18.5, 1.08×" in md
    html = render_html(report_view(report))
    assert "device-resident" in html and "17.1 / 18.5, 1.08×" in html
