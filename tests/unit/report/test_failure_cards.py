"""One failure card per distinct result, whole messages in report.md, the profile's legend as HTML text
(issue 34 item 10; tests/integration/test_report_in_a_browser.py checks the same in a real browser)."""

from __future__ import annotations

import dataclasses

from harness.report import CaseRecord, Report
from harness.report.render_html import render_html
from harness.report.render_md import render_markdown
from harness.report.view import report_view
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE, output_stats, record_for

LONG = "output 'y' FAIL: " + "the converted model overflows where the golden does not, " * 5 + "and this is the end."


def _failing(data_max: float, reused_from: str | None) -> CaseRecord:
    base = record_for(SweepPoint(precision="fp16", data_max=data_max))
    return dataclasses.replace(
        base,
        status="fail",
        message=f"{base.case.id} does not match its golden\n  {LONG}\n  fix: keep Sub FP32",
        outputs=(output_stats("y", 1.0, passed=False),),
        reused_from=reused_from,
        reuse_kind="graph" if reused_from else "",
    )


def _report() -> Report:
    root = _failing(float("inf"), None)
    twin = dataclasses.replace(_failing(float("inf"), root.case.id), case=SweepPoint(precision="bf16"))
    other = _failing(8.0, None)
    return Report.build([root, twin, other], created="2026-11-27T00:00:00+00:00", provenance=PROVENANCE)


def test_one_card_per_distinct_result_naming_the_cases_that_share_it() -> None:
    report = _report()
    html = render_html(report_view(report))
    assert html.count('<div class="failure">') == 2
    root, twin, _ = report.cases
    assert "Same converted model, same result (not run again)" in html and twin.case.id in html


def test_report_md_carries_whole_messages() -> None:
    md = render_markdown(report_view(_report()))
    assert "and this is the end." in md and "fix: keep Sub FP32" in md
    assert md.count("```text") == 2


def test_the_profile_legend_is_html_text_under_the_svg() -> None:
    from harness.diagnose.facts import Diagnosis, TensorError
    from harness.report.diagnosis import PROFILE_CAPTION, diagnosis_html

    profile = (
        TensorError(tensor="h", node="mm", op="MatMul", error=1e-4, passed=True, computed=True),
        TensorError(tensor="y", node="sub", op="Sub", error=1.0, passed=False, computed=True),
    )
    html = diagnosis_html(Diagnosis(cause=None, profile=profile, low_nodes=2, budget=4, tune_command="castguard tune"))
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert "green band" not in svg and f"<figcaption>{PROFILE_CAPTION}</figcaption>" in html
