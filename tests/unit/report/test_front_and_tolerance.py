"""Issue 23 item 9: Pareto fronts number passing cases only (failing ones are drawn, never numbered), and the
error plot draws each precision's tolerance line."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from harness.judge.tolerances import default_tolerance, golden_scale
from harness.report import Report
from harness.report.model import CaseRecord
from harness.report.pareto import best_passing, front_points
from harness.report.plots import error_vs_share_figure
from harness.report.render_html import render_html
from harness.report.speed import speed_front, speed_rows
from harness.report.view import report_view
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE, output_stats, record_for


def _case(
    data_max: float,
    share: float,
    error: float,
    status: str = "pass",
    speedup: float | None = None,
    precision: str = "fp16",
) -> CaseRecord:
    base = record_for(SweepPoint(precision=precision, data_max=data_max))
    return dataclasses.replace(
        base,
        status=status,
        lowp_flop_share=share,
        outputs=(output_stats("y", 4 * error, passed=status == "pass"),),
        speedup=speedup,
        latency_ms=None if speedup is None else 1 / speedup,
        fp32_latency_ms=None if speedup is None else 1.0,
    )


# the failing case has the largest share (and is the fastest): on a status-blind front it is point #1
FAILING = _case(math.inf, 1.00, 0.3, status="fail", speedup=1.9)
PASSING = (_case(512.0, 0.90, 2e-3, speedup=1.3), _case(8.0, 0.60, 1e-3, speedup=1.1))
CASES = (FAILING, *PASSING)


def test_share_front_numbers_passing_cases_only() -> None:
    groups = front_points(CASES)
    assert [g[0] for g in groups] == list(PASSING)
    assert best_passing(CASES) is PASSING[0]


def test_the_plot_draws_the_failing_case_but_numbers_only_passing_ones() -> None:
    fig = error_vs_share_figure(CASES, title="m")
    numbered = {t.get_text(): t.xy for ax in fig.axes for t in ax.texts if t.get_text().isdigit()}
    assert set(numbered) == {"1", "2"}
    assert numbered["1"] == pytest.approx((100 * PASSING[0].lowp_flop_share, PASSING[0].worst_error))
    assert numbered["2"] == pytest.approx((100 * PASSING[1].lowp_flop_share, PASSING[1].worst_error))
    drawn = np.concatenate([c.get_offsets() for ax in fig.axes for c in ax.collections])
    assert any(abs(x - 100.0) < 1e-9 for x, _ in drawn)  # the failing case is still a point


def test_the_html_front_table_starts_with_a_passing_case() -> None:
    report = Report.build(CASES, created="2026-11-26T00:00:00+00:00", provenance=PROVENANCE)
    html = render_html(report_view(report))
    table = html.split("<h3>Pareto front</h3>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr><td class="num">(\d+)</td><td>(.*?)</td>', table)
    assert [rank for rank, _ in rows] == ["1", "2"]
    assert PASSING[0].case_id in rows[0][1] and FAILING.case_id not in table


def test_speed_front_holds_passing_cases_only() -> None:
    assert speed_front(CASES) == list(PASSING)
    flags = {row[0].case_id: row[5] for row in speed_rows(CASES)}
    assert flags == {FAILING.case_id: False, PASSING[0].case_id: True, PASSING[1].case_id: True}


@pytest.mark.parametrize("scale", [1.0, 7.3, 300.0])
def test_error_plot_draws_a_tolerance_line_per_precision(scale: float) -> None:
    from harness.report.plotdata import tolerance_levels

    golden = np.linspace(-scale, scale, 11, dtype=np.float32)
    cases = []
    expected = {}
    for precision, error in (("fp16", 1e-3), ("bf16", 1e-2)):
        tol = default_tolerance(precision, golden)
        g = golden_scale(golden)
        expected[precision] = max(tol.atol, tol.rtol * g) / g  # the largest scaled error an output passes with
        stats = dataclasses.replace(
            output_stats("y", 4 * error, passed=True), atol=tol.atol, rtol=tol.rtol, golden_absmax=g, max_abs=error * g
        )
        cases.append(dataclasses.replace(_case(8.0, 0.5, error, precision=precision), outputs=(stats,)))
    assert tolerance_levels(cases) == pytest.approx(expected)
    fig = error_vs_share_figure(cases, title="m")
    lines = {
        line.get_gid(): line.get_ydata()
        for ax in fig.axes
        for line in ax.get_lines()
        if (line.get_gid() or "").startswith("tolerance-")
    }
    assert set(lines) == {"tolerance-fp16", "tolerance-bf16"}
    for precision, level in expected.items():
        assert list(lines[f"tolerance-{precision}"]) == pytest.approx([level, level])
        low, high = fig.axes[0].get_ylim()
        assert low < level < high  # inside the visible range
    # the default is 4-8 eps of the output's largest value: fp16 eps 2^-10, bf16 eps 2^-7
    assert 4 * 2**-10 <= expected["fp16"] <= 8 * 2**-10 and 4 * 2**-7 <= expected["bf16"] <= 8 * 2**-7


def test_non_elementwise_outputs_draw_no_tolerance_line() -> None:
    from harness.report.plotdata import tolerance_levels

    stats = dataclasses.replace(output_stats("y", 4e-3, passed=True), mode="median")
    assert tolerance_levels([dataclasses.replace(_case(8.0, 0.5, 1e-3), outputs=(stats,))]) == {}
