"""The Pareto front and the two PNG plots."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from matplotlib.image import imread

from harness.report import CaseRecord
from harness.report.pareto import best_passing, front_cases, front_points, pareto_front
from harness.report.plots import error_vs_share_png, pass_by_data_max_png
from harness.sweep import SweepPoint
from tests.helpers.report_samples import SHA, output_stats, sample_report


@pytest.mark.parametrize(
    ("points", "front"),
    [
        ([(0.5, 1e-3)], [0]),
        ([(0.2, 1e-3), (0.5, 2e-3), (0.9, 5e-3), (1.0, 0.3)], [3, 2, 1, 0]),  # a clean trade-off: all on it
        ([(0.5, 1e-3), (0.5, 2e-3), (0.4, 1e-3), (0.9, 1e-3)], [3]),  # one point dominates
        ([(0.5, 1e-3), (0.5, 1e-3), (0.2, 5e-3)], [0, 1]),  # ties are both kept
        ([(1.0, math.inf), (0.6, 0.01), (0.8, math.nan), (0.6, 0.02)], [0, 1]),  # NaN counts as inf
        ([(0.3, math.inf), (0.9, math.inf)], [1]),
    ],
)
def test_pareto_front_on_hand_made_points(points: list[tuple[float, float]], front: list[int]) -> None:
    assert pareto_front(points) == front


def _record(case: SweepPoint, *, share: float | None, error: float | None, status: str = "pass") -> CaseRecord:
    outputs = () if error is None else (output_stats("y", error, passed=status == "pass"),)
    return CaseRecord(model="m", model_sha256=SHA, case=case, status=status, outputs=outputs, lowp_flop_share=share)


def test_front_and_best_case_ignore_unmeasured_cases() -> None:
    cases = [
        _record(SweepPoint(data_max=64.0), share=0.6, error=1e-3),
        _record(SweepPoint(data_max=512.0), share=0.9, error=2e-3),
        _record(SweepPoint(data_max=math.inf), share=1.0, error=math.inf, status="fail"),
        _record(SweepPoint(precision="bf16"), share=None, error=None, status="error"),
    ]
    assert [c.case.data_max for c in front_cases(cases)] == [512.0, 64.0]  # the failing case is never on it
    best = best_passing(cases)
    assert best is not None and best.case.data_max == 512.0
    assert best_passing(cases[2:]) is None


def _image(png: bytes) -> np.ndarray:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    return imread(io.BytesIO(png), format="png")


def test_plots_of_the_sample_sweep_are_valid_pngs() -> None:
    cases = sample_report().cases_of("mnist")
    scatter = _image(error_vs_share_png(cases, title="mnist: error vs share"))
    grid = _image(pass_by_data_max_png(cases, title="mnist: pass/fail"))
    assert scatter.shape[0] > 200 and scatter.shape[1] > 400 and grid.shape[1] > 300
    assert scatter[..., :3].std() > 0.05  # something was drawn


@pytest.mark.parametrize("errors", [[0.0], [math.nan], [math.inf, 0.0, 1e-3], [None]])
def test_plots_handle_single_cases_and_non_finite_errors(errors: list[float | None]) -> None:
    cases = [
        _record(SweepPoint(data_max=float(64 * (i + 1))), share=None if e is None else 0.5, error=e)
        for i, e in enumerate(errors)
    ]
    assert _image(error_vs_share_png(cases, title="$weird_{name}$ & <b>")).shape[1] > 400
    assert _image(pass_by_data_max_png(cases, title="$weird$")).shape[1] > 300


def test_identical_results_share_one_front_point() -> None:
    same = [_record(SweepPoint(keep_io_types=k), share=1.0, error=1e-3) for k in (False, True)]
    other = _record(SweepPoint(data_max=16.0), share=0.2, error=1e-4)
    groups = front_points([*same, other])
    assert [[c.case.keep_io_types for c in g] for g in groups] == [[False, True], [False]]
