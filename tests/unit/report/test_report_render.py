"""report.md and report.html: every case shown, failing first, hostile text escaped, edge cases drawn."""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser

import pytest

from harness.report import CaseRecord, Report
from harness.report.render_html import render_html
from harness.report.render_md import md_code, render_markdown
from harness.report.view import report_view
from harness.sweep import SweepPoint
from tests.helpers.report_samples import HOSTILE, PROVENANCE, SHA, hostile_report, output_stats, sample_report


@pytest.fixture(scope="module")
def sample() -> Report:
    return sample_report()


@pytest.fixture(scope="module")
def sample_html(sample: Report) -> str:
    return render_html(report_view(sample))


def test_markdown_lists_every_case_with_failing_first(sample: Report) -> None:
    text = render_markdown(report_view(sample))
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(sample.cases)
    for case in sample.cases:
        assert f"`{case.case_id}`" in text
    mnist_rows = [r for r in rows if "-emulate` |" in r][:3]
    assert [r.split(" | ")[1] for r in mnist_rows] == ["ERROR", "FAIL", "FAIL"]
    assert "## `mnist`: 24 cases: 21 pass, 2 fail, 1 error" in text
    assert "**Legend.**" in text and "| inf |" in text


def test_markdown_never_lets_names_break_the_table(sample: Report) -> None:
    text = render_markdown(report_view(hostile_report()))
    row = next(line for line in text.splitlines() if line.startswith("| `fp16"))
    assert len(re.split(r"(?<!\\)\|", row)) == 10  # 8 cells: every pipe from the hostile names is escaped
    assert "<script>" not in row.replace("``<script>", "")
    assert md_code("a`b|c\nd", in_table=True) == "``a`b\\|c d``"
    assert md_code("x|y", in_table=False) == "`x|y`"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html: str) -> _Collector:
    collector = _Collector()
    collector.feed(html)
    return collector


def test_html_is_self_contained_with_every_case_and_both_plots(sample: Report, sample_html: str) -> None:
    page = _parse(sample_html)
    text = "".join(page.text)
    for case in sample.cases:
        assert case.case_id in text
    assert len(page.images) == 2 * len(sample.models)
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", sample_html)  # nothing fetched from outside
    assert "Pareto front" in text and "Provenance" in text and "Failing cases" in text
    assert "ConversionError: step validate" in text  # failing-case details


def test_html_escapes_hostile_text() -> None:
    html = render_html(report_view(hostile_report()))
    assert "<script>" not in html
    page = _parse(html)
    assert "script" not in page.tags
    assert HOSTILE.split("\n")[0] in "".join(page.text)


def test_single_case_with_nan_error_and_unmeasured_case_render() -> None:
    nan_case = CaseRecord(
        model="tiny",
        model_sha256=SHA,
        case=SweepPoint(),
        status="fail",
        message="NaN everywhere",
        outputs=(output_stats("y", math.nan, passed=False),),
        lowp_flop_share=1.0,
        cast_count=0,
    )
    for record in (
        nan_case,
        CaseRecord(model="tiny", model_sha256=SHA, case=SweepPoint(), status="skip", message="runner trt unavailable"),
    ):
        report = Report.build([record], created="2026-01-01T00:00:00+00:00", provenance=PROVENANCE)
        page = _parse(render_html(report_view(report)))
        text = "".join(page.text)
        assert record.case_id in text and "1 case" in text
        assert page.images == [] and "No plots: they compare cases" in text  # a chart of one point: none drawn
        assert record.case_id in render_markdown(report_view(report))
    assert "inf" in render_markdown(report_view(Report.build([nan_case], created="t", provenance=PROVENANCE)))


def test_empty_report_renders() -> None:
    report = Report.build([], created="t", provenance=PROVENANCE)
    assert "0 cases" in render_markdown(report_view(report))
    assert "0 cases" in render_html(report_view(report))


def test_report_html_and_md_show_top1_and_kl_of_a_vocab_output() -> None:
    """A case with a logits output (last axis a vocabulary, judged without configuration: harness.judge.vocab):
    report.html and report.md both show its top-1 token agreement and mean KL, as report.json carries them; a
    report without such an output has no logits table."""
    import dataclasses

    import numpy as np

    from harness.judge.compare import Tolerance, compare_outputs
    from harness.report.figures import output_stats as stats_of
    from tests.helpers.report_samples import record_for

    rng = np.random.default_rng(0)
    gold = rng.standard_normal((2, 4, 1200)).astype(np.float32) * 3
    got = gold + rng.standard_normal(gold.shape).astype(np.float32) * 0.05
    got.reshape(-1, 1200)[np.arange(2), gold.reshape(-1, 1200).argmax(axis=1)[:2]] -= 50.0  # 2 of 8 positions flip
    comparison = compare_outputs({"logits": got}, {"logits": gold}, tolerances={}, default=Tolerance(atol=1, rtol=1))
    (out,) = stats_of(comparison, [{"logits": gold}])
    assert out.top1_agreement == 0.75 and out.kl_mean is not None and out.kl_mean > 0
    record = dataclasses.replace(record_for(SweepPoint(precision="fp16")), outputs=(out,))
    report = Report.build([record], created="2026-11-20T10:00:00+00:00", provenance=PROVENANCE)
    html, md = render_html(report_view(report)), render_markdown(report_view(report))
    kl = f"{out.kl_mean:.3g}"
    assert "<h3>Logits</h3>" in html and re.search(
        rf"<code>logits</code></td><td[^>]*>0\.7500</td><td[^>]*>{kl}<", html
    )
    assert re.search(rf"\| `logits` \| 0\.7500 \| {re.escape(kl)} \|", md)
    plain = render_html(report_view(sample_report()))
    assert "<h3>Logits</h3>" not in plain and "top-1 agreement" not in plain
