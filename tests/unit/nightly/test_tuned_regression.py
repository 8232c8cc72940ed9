"""A stored tuned plan that stops meeting its bound on a new model version is a nightly regression that names the
nodes to move to FP32 (other cases of a changed model are only listed as changed)."""

from __future__ import annotations

import dataclasses
import math

from harness.nightly.comparison import compare_reports
from harness.nightly.render import comparison_markdown
from harness.nightly.rules import parse_rules
from harness.report import Report
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE, record_for

TUNED = SweepPoint(precision="fp16", data_max=math.inf, tuned=True)  # record_for knows 8, 512, inf
GRID = SweepPoint(precision="fp16", data_max=512.0)


def _report(*records: object, created: str) -> Report:
    return Report.build(records, created=created, provenance=PROVENANCE)  # type: ignore[arg-type]


def test_tuned_plan_missing_its_bound_on_a_new_model_is_a_regression_naming_the_nodes() -> None:
    old_tuned = dataclasses.replace(
        record_for(TUNED), status="pass", model_sha256="a" * 64, kept_fp32=(("residual_add", "local error"),)
    )
    old_grid = dataclasses.replace(record_for(GRID), status="pass", model_sha256="a" * 64)
    new_tuned = dataclasses.replace(
        old_tuned,
        status="fail",
        model_sha256="b" * 64,
        kept_fp32=(("residual_add", "local error"), ("shift_add", "x")),
        moved_fp32=("shift_add",),  # a typed fact, not prose in kept_fp32
    )
    new_grid = dataclasses.replace(old_grid, status="fail", model_sha256="b" * 64)
    comparison = compare_reports(
        _report(new_tuned, new_grid, created="2026-11-22T02:00:00+00:00"),
        _report(old_tuned, old_grid, created="2026-11-21T02:00:00+00:00"),
        rules=parse_rules("status"),
        source="baseline.json",
    )
    assert not comparison and comparison.exit_code == 1
    (change,) = comparison.regressions
    assert change.case_id == "fp16-tuned-keepio0-emulate" and "move to FP32: shift_add" in change.rule.text
    assert {k[1] for k in comparison.model_changed} == {GRID.id, TUNED.id}
    assert "shift_add" in comparison_markdown(comparison)


def test_a_tuned_plan_that_still_passes_on_a_new_model_is_no_regression() -> None:
    old = dataclasses.replace(record_for(TUNED), status="pass", model_sha256="a" * 64)
    new = dataclasses.replace(old, model_sha256="b" * 64)
    comparison = compare_reports(
        _report(new, created="2026-11-22T02:00:00+00:00"),
        _report(old, created="2026-11-21T02:00:00+00:00"),
        rules=parse_rules("status"),
        source="baseline.json",
    )
    assert comparison and not comparison.regressions
