"""One view per report: the markdown and HTML pages render what the view says and recompute none of it."""

from __future__ import annotations

import dataclasses

from harness.report.format import display_sorted, grouped_notes
from harness.report.pareto import best_passing, front_points
from harness.report.render_html import render_html
from harness.report.render_md import render_markdown
from harness.report.view import report_view
from tests.helpers.report_samples import sample_report


def test_the_view_holds_order_front_best_and_notes_per_model() -> None:
    report = sample_report()
    view = report_view(report)
    assert [m.name for m in view.models] == list(report.models)
    for model in view.models:
        cases = report.cases_of(model.name)
        assert list(model.cases) == display_sorted(cases)
        assert model.best == best_passing(cases) and [list(g) for g in model.front] == front_points(cases)
        assert list(model.notes) == grouped_notes(cases)
        assert sum(model.counts.values()) == len(cases)
    assert view.reused == sum(c.reused_from is not None for c in report.cases)


def test_the_pages_render_the_view_not_their_own_figures() -> None:
    view = report_view(sample_report())
    model = view.models[0]
    other = next(c for c in model.cases if c is not model.best)
    shifted = dataclasses.replace(
        view,
        models=(
            dataclasses.replace(model, best=other, front=(), notes=(("a note only the view has", [other.case_id]),)),
            *view.models[1:],
        ),
    )
    markdown, html = render_markdown(shifted), render_html(shifted)
    assert f"best passing case: `{other.case_id}`" in markdown
    assert "a note only the view has" in markdown and "a note only the view has" in html
    assert "No passing case has both a FLOP share and an error" in html  # the (emptied) front, not a recomputed one
    assert f"best passing case: `{other.case_id}`" not in render_markdown(view)
