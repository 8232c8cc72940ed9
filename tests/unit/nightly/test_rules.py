"""The nightly verdict: rule grammar, report-vs-baseline comparison, and its rendering."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest

from harness.core.errors import UserError
from harness.nightly.comparison import compare_reports, judge
from harness.nightly.render import comparison_html, comparison_lines, comparison_markdown, fmt_change
from harness.nightly.rules import TIME_FLOOR_S, Rule, metric, parse_rule, parse_rules
from harness.report import CaseRecord, Report, Timings
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE, output_stats, record_for, sample_report

CASE = SweepPoint(precision="fp16", data_max=512.0)


def _record(**changes: object) -> CaseRecord:
    return dataclasses.replace(record_for(CASE), **changes)  # type: ignore[arg-type]


def _with_max_rel(value: float) -> CaseRecord:
    return _record(outputs=(output_stats("Plus214_Output_0", value, passed=True),))


def _report(*records: CaseRecord, created: str = "2026-11-21T02:00:00+00:00") -> Report:
    return Report.build(records, created=created, provenance=PROVENANCE)


# ---- grammar ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "unit", "threshold"),
    [
        ("max_rel:+25%", "max_rel", "%", 0.25),
        ("max_rel:25%", "max_rel", "%", 0.25),  # the sign may be left out
        ("lowp_share:-2pp", "lowp_share", "pp", 0.02),
        ("lowp_share:-10%", "lowp_share", "%", 0.10),
        ("convert_time:+50%", "convert_time", "%", 0.50),
        ("max_abs:+0.01", "max_abs", "abs", 0.01),
        ("error:+1e-3", "error", "abs", 1e-3),
        ("status", "status", "status", 0.0),
    ],
)
def test_rules_parse_into_frozen_values(text: str, metric: str, unit: str, threshold: float) -> None:
    rule = parse_rule(text)
    assert (rule.metric, rule.unit, rule.text) == (metric, unit, text)
    assert rule.threshold == pytest.approx(threshold)


def test_rules_come_comma_separated_or_repeated() -> None:
    rules = parse_rules(["max_rel:+25%,status", " lowp_share:-2pp "])
    assert [r.metric for r in rules] == ["max_rel", "status", "lowp_share"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_rell:+25%", "did you mean 'max_rel'"),
        ("max_rel:-25%", "would flag improvements"),
        ("lowp_share:+2pp", "would flag improvements"),
        ("max_rel:+2pp", "percentage points (pp) apply to shares only"),
        ("status:+1", "status takes no threshold"),
        ("max_rel", "expected METRIC:[+|-]NUMBER[%|pp]"),
        ("max_rel:lots", "expected METRIC:[+|-]NUMBER[%|pp]"),
        ("max_rel:+25%%", "expected METRIC:[+|-]NUMBER[%|pp]"),
    ],
)
def test_a_bad_rule_is_a_user_error_naming_it(text: str, problem: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_rules(f"error:+5%,{text}")  # the bad one is named among good ones
    assert f"--fail-on-regression rule {text!r}" in str(caught.value)
    assert problem in str(caught.value)
    assert "fix:" in str(caught.value)


def test_repeated_or_empty_rule_lists_are_refused() -> None:
    with pytest.raises(UserError, match="more than one rule for max_rel"):
        parse_rules("max_rel:+25%,max_rel:+10%")
    with pytest.raises(UserError, match="no rule given"):
        parse_rules(" , ")


# ---- one case, one rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (0.4, 0.4, None),
        (0.4, 0.5, None),  # exactly +25 % is within "more than 25 %"
        (0.4, 0.504, True),
        (0.4, 0.296, False),  # an improvement past the same threshold
        (0.4, 0.32, None),
        (0.4, math.inf, True),  # overflow
        (0.4, math.nan, True),  # NaN counts as inf
        (math.inf, 0.4, False),
        (math.inf, math.inf, None),
        (0.0, 1e-6, None),  # below max_rel's floor (0.1) both count as 0.1: no change
        (1e-3, 0.09, None),  # +8900 %, but only near-zero goldens move it there: under the floor
        (1e-3, 0.2, True),  # past the floor: +100 % of the floor
    ],
)
def test_relative_error_rule(before: float, after: float, expected: bool | None) -> None:
    found = judge(_with_max_rel(before), _with_max_rel(after), parse_rule("max_rel:+25%"))
    assert (None if found is None else found[0]) is expected


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (1e-3, 1.26e-3, True),  # scaled error: +26 %
        (1e-3, 0.74e-3, False),
        (1e-7, 3e-7, None),  # +200 %, but a change of 2e-7: fp32 noise, under the error floor
        (0.0, 2e-5, True),  # from exact to an error past the floor
    ],
)
def test_error_rule_has_a_floor_for_fp32_noise(before: float, after: float, expected: bool | None) -> None:
    # output_stats: scaled error (max_abs / max|golden|) = max_rel / 4
    found = judge(_with_max_rel(4 * before), _with_max_rel(4 * after), parse_rule("error:+25%"))
    assert (None if found is None else found[0]) is expected


def test_over_tol_is_the_error_in_units_of_the_outputs_tolerance() -> None:
    record = _with_max_rel(0.1)  # max_abs 0.2, atol 0.03125, rtol 2**-9, max|golden| 8
    (stats,) = record.outputs
    over = metric("over_tol").read(record)
    assert over == pytest.approx(stats.max_abs / (stats.atol + stats.rtol * stats.golden_absmax))
    found = judge(record, _with_max_rel(0.2), parse_rule("over_tol:+50%"))
    assert found is not None and found[0] and found[1].delta == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (0.93, 0.91, None),  # exactly 2 points, float rounding notwithstanding
        (0.93, 0.90, True),
        (0.90, 0.93, False),
        (0.5, 0.5, None),
    ],
)
def test_share_rule_in_percentage_points(before: float, after: float, expected: bool | None) -> None:
    found = judge(_record(lowp_flop_share=before), _record(lowp_flop_share=after), parse_rule("lowp_share:-2pp"))
    assert (None if found is None else found[0]) is expected
    if found is not None:
        assert fmt_change(found[1]) == f"{100 * (after - before):+.1f}pp"


def test_timing_changes_below_the_noise_floor_are_never_judged() -> None:
    rule = parse_rule("convert_time:+50%")
    small, doubled = Timings(convert_s=0.01), Timings(convert_s=0.01 + TIME_FLOOR_S * 0.9)
    assert judge(_record(timings=small), _record(timings=doubled), rule) is None
    found = judge(_record(timings=Timings(convert_s=1.0)), _record(timings=Timings(convert_s=2.0)), rule)
    assert found is not None and found[0] and fmt_change(found[1]) == "+100.0%"


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("pass", "fail", True),
        ("pass", "error", True),
        ("pass", "skip", True),
        ("xfail", "xpass", True),
        ("fail", "pass", False),
        ("error", "pass", False),
        ("xpass", "xfail", False),
        ("fail", "error", None),
        ("pass", "pass", None),
        ("skip", "skip", None),
        ("pass", "xfail", None),
    ],
)
def test_status_rule(before: str, after: str, expected: bool | None) -> None:
    found = judge(_record(status=before), _record(status=after), parse_rule("status"))
    assert (None if found is None else found[0]) is expected


def test_a_metric_missing_on_either_side_is_left_to_the_status_rule() -> None:
    errored = _record(status="error", outputs=(), lowp_flop_share=None)
    for text in ("max_rel:+1%", "lowp_share:-1pp", "error:+1%"):
        assert judge(_record(), errored, parse_rule(text)) is None
    assert judge(_record(), errored, parse_rule("status")) is not None


# ---- whole reports ---------------------------------------------------------------------------------


RULES = parse_rules("max_rel:+25%,lowp_share:-2pp,status,convert_time:+50%")


def test_an_identical_run_has_no_changes() -> None:
    report = sample_report()
    result = compare_reports(report, report, rules=RULES, source="base.json")
    assert result and result.exit_code == 0
    assert result.compared == len(report.cases)
    assert (result.regressions, result.improvements, result.new, result.missing) == ((), (), (), ())


def _edit(
    report: Report, edits: dict[str, Callable[[CaseRecord], CaseRecord]], *, drop: tuple[str, ...] = ()
) -> Report:
    """Edit or drop mnist cases by case id."""
    cases = [
        edits[c.case_id](c) if c.model == "mnist" and c.case_id in edits else c
        for c in report.cases
        if not (c.model == "mnist" and c.case_id in drop)
    ]
    return Report.build(cases, created="2026-11-21T02:00:00+00:00", provenance=report.provenance)


def test_regressions_improvements_new_and_missing_are_all_listed() -> None:
    base = sample_report()
    ids = [c.case_id for c in base.cases if c.model == "mnist" and c.status == "pass"]
    worse = dataclasses.replace(base.cases[-1], case=SweepPoint(precision="fp16", data_max=64.0))  # a new case id
    current = _edit(
        base,
        {
            ids[0]: lambda c: dataclasses.replace(c, status="fail"),
            ids[1]: lambda c: dataclasses.replace(c, lowp_flop_share=c.lowp_flop_share - 0.05),
            ids[2]: lambda c: dataclasses.replace(c, lowp_flop_share=c.lowp_flop_share + 0.05),
        },
        drop=(ids[3],),
    )
    current = Report.build([*current.cases, worse], created=current.created, provenance=current.provenance)
    result = compare_reports(current, base, rules=RULES, source="base.json")
    assert not result and result.exit_code == 1
    assert {(c.case_id, c.rule.metric) for c in result.regressions} == {(ids[0], "status"), (ids[1], "lowp_share")}
    assert [(c.case_id, c.rule.metric) for c in result.improvements] == [(ids[2], "lowp_share")]
    assert [key[1] for key in result.missing] == [ids[3]]
    assert result.new == (worse.key,)


def test_a_changed_model_is_not_judged_but_listed() -> None:
    """A new model sha makes the golden stale (an error of its own); it must not read as a regression."""
    base = sample_report()
    mnist = [c.case_id for c in base.cases if c.model == "mnist"]
    stale = {case_id: lambda c: dataclasses.replace(c, model_sha256="ab" * 32, status="error") for case_id in mnist}
    result = compare_reports(_edit(base, stale), base, rules=RULES, source="base.json")
    assert result and not result.regressions
    assert [key[1] for key in result.model_changed] == mnist
    assert result.compared == len(base.cases) - len(mnist)


def test_rendering_shows_case_metric_values_change_and_rule() -> None:
    before = _report(_with_max_rel(0.25))
    after = _report(dataclasses.replace(_with_max_rel(0.5), status="fail"))
    result = compare_reports(after, before, rules=RULES, source="nightly/base.json")
    markdown = comparison_markdown(result)
    assert "| case | metric | baseline | now | change | rule | since |" in markdown
    assert "| max_rel | 2.50e-01 | 5.00e-01 | +100.0% | `max_rel:+25%` | this run |" in markdown
    assert "| status | pass | fail | worse | `status` | this run |" in markdown
    html = comparison_html(result)
    assert "<h3>Regressions</h3>" in html and "+100.0%" in html
    lines = comparison_lines(result)
    assert lines[0].startswith("2 regression(s), 0 improvement(s) over 1 case(s)")
    assert any("REGRESSION mnist / " + CASE.id in line and "max_rel 2.50e-01 -> 5.00e-01" in line for line in lines)


def test_rendering_escapes_hostile_names() -> None:
    hostile = "<b>m|x</b>"
    before = _report(dataclasses.replace(_record(), model=hostile))
    after = _report(dataclasses.replace(_record(), model=hostile, status="fail"))
    result = compare_reports(after, before, rules=RULES, source="<base>")
    html = comparison_html(result)
    assert "<b>m" not in html and "&lt;b&gt;m|x&lt;/b&gt;" in html
    assert "`<b>m\\|x</b> / " in comparison_markdown(result)


def test_rule_values_are_validated() -> None:
    with pytest.raises(ValueError, match="threshold"):
        Rule(text="x", metric="max_rel", unit="%", threshold=-1.0)
    with pytest.raises(ValueError, match="metric"):
        Rule(text="x", metric="speed")


def test_cached_conversions_and_shared_magnitudes_are_not_timed() -> None:
    cold = _record(timings=Timings(magnitudes_s=0.9, convert_s=1.0, total_s=3.0))
    warm = _record(timings=Timings(convert_s=0.001, total_s=1.1), conversion_cached=True)
    for text in ("convert_time:+50%", "total_time:+50%"):
        assert judge(warm, cold, parse_rule(text)) is None and judge(cold, warm, parse_rule(text)) is None
    first = _record(timings=Timings(magnitudes_s=0.9, convert_s=1.0, total_s=3.0))  # the model's first case
    later = _record(timings=Timings(convert_s=1.0, total_s=2.1))
    assert judge(later, first, parse_rule("total_time:+10%")) is None
