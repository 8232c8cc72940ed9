"""report.html's error plot: log axis with inf/NaN in a band above it, share axis zoomed, fixed precision
colours, Pareto numbers that never overlap."""

from __future__ import annotations

import dataclasses
import math

from harness.nightly.trends import trend_png
from harness.report.model import CaseRecord
from harness.report.plots import error_vs_share_figure
from harness.report.plotstyle import PRECISION_COLOURS, precision_colour, share_limits
from harness.sweep import SweepPoint
from tests.helpers.report_samples import output_stats, record_for


def _case(precision: str, data_max: float, share: float, max_rel: float, status: str = "pass") -> CaseRecord:
    return dataclasses.replace(
        record_for(SweepPoint(precision=precision, data_max=8.0)),
        case=SweepPoint(precision=precision, data_max=data_max),
        status=status,
        lowp_flop_share=share,
        outputs=(output_stats("y", max_rel, passed=status == "pass"),),
    )


def test_inf_and_nan_are_points_in_a_band_above_the_log_axis() -> None:
    cases = [
        _case("fp16", 8.0, 0.90, 1e-3),
        _case("fp16", 64.0, 0.95, 2e-3),
        _case("bf16", 512.0, 0.97, math.inf, "fail"),
        _case("bf16", math.inf, 0.99, math.nan, "fail"),
    ]
    fig = error_vs_share_figure(cases, title="m")
    band, main = fig.axes
    assert main.get_yscale() == "log" and band.get_ylim() == (0.0, 1.0)
    assert [t.get_text() for t in band.get_yticklabels()] == ["inf / NaN"]
    band_points = [tuple(p) for coll in band.collections for p in coll.get_offsets()]
    assert sorted(band_points)[:2] == [(97.0, 0.5), (99.0, 0.5)]  # the two lost cases, above the axis
    assert all(math.isfinite(y) for coll in main.collections for _, y in coll.get_offsets())
    low, high = main.get_xlim()
    assert 80 < low < 90 and 99 < high <= 102  # zoomed to 90..99 %, not 0..100


def test_finite_errors_draw_one_axis_zoomed_to_the_data() -> None:
    fig = error_vs_share_figure([_case("fp16", 8.0, 0.40, 1e-3), _case("fp16", 64.0, 0.60, 2e-3)], title="m")
    (main,) = fig.axes
    assert main.get_xlim() == share_limits([0.40, 0.60]) and main.get_xlim()[0] > 30


def test_pareto_numbers_never_overlap_even_when_points_crowd() -> None:
    # eight front points within 1.4 % of share and a factor 1.2 of error: labels must move apart
    cases = [_case("fp16", 2.0**k, 0.90 + 0.002 * k, 1e-3 * (1.0 + 0.03 * k)) for k in range(8)]
    fig = error_vs_share_figure(cases, title="crowded")
    fig.canvas.draw()
    (main,) = fig.axes
    labels = [t for t in main.texts if t.get_text().isdigit()]
    assert sorted(int(t.get_text()) for t in labels) == list(range(1, 9))
    boxes = [t.get_window_extent() for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_fp16_and_bf16_keep_their_colours_in_every_chart() -> None:
    assert precision_colour("fp16") == precision_colour("fp16-emulate") == PRECISION_COLOURS["fp16"]
    assert precision_colour("bf16-trt") == PRECISION_COLOURS["bf16"] and precision_colour("int8") == "grey"
    fig = error_vs_share_figure([_case("bf16", 8.0, 0.5, 1e-2), _case("fp16", 8.0, 0.6, 1e-3)], title="m")
    colours = {tuple(round(v, 3) for v in coll.get_facecolor()[0][:3]) for coll in fig.axes[0].collections[:2]}
    from matplotlib.colors import to_rgb

    assert colours == {tuple(round(v, 3) for v in to_rgb(PRECISION_COLOURS[p])) for p in ("fp16", "bf16")}
    from harness.nightly.trend_data import Trend, TrendRun

    trend = Trend(
        model="m",
        families=("bf16-emulate", "fp16-emulate"),
        runs=tuple(
            TrendRun(
                created=f"2026-11-0{d}T00:00:00+00:00",
                commit=None,
                passed=2,
                total=2,
                max_error=(1e-2, 1e-3),
                best_share=(0.5, 0.6),
            )
            for d in (1, 2)
        ),
    )
    assert trend_png(trend).startswith(b"\x89PNG")


def test_cases_at_one_spot_stand_side_by_side_and_say_how_many() -> None:
    """Four failing cases at one spot (100 %, error 0.25): two fp16 and two bf16. Each precision gets one marker, the two
    markers are drawn apart (neither hides the other), each says "×2", and the axis ends at 100 %."""
    cases = [_case(p, d, 1.0, 1.0, "fail") for p in ("fp16", "bf16") for d in (8.0, 512.0)] + [
        _case("fp16", 64.0, 0.9, 1e-3)
    ]
    fig = error_vs_share_figure(cases, title="m")
    fig.canvas.draw()
    (main,) = fig.axes
    assert main.get_xlim()[1] == 100.0
    at_edge = [c for c in main.collections if len(c.get_offsets()) == 1 and tuple(c.get_offsets()[0]) == (100.0, 0.25)]
    assert len(at_edge) == 2  # one marker per precision, not four stacked
    pixels = {tuple(round(v) for v in c.get_offset_transform().transform(c.get_offsets())[0]) for c in at_edge}
    assert len(pixels) == 2
    assert [t.get_text() for t in main.texts if t.get_text().startswith("×")] == ["×2", "×2"]
