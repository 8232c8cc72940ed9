"""The nightly ``trt_build`` rule: a case whose converted model built in TensorRT and no longer does regresses."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.core.errors import UserError
from harness.nightly.comparison import TRT_BUILDS, compare_reports, judge
from harness.nightly.render import comparison_markdown, fmt_change
from harness.nightly.rules import RECOMMENDED_RULES, parse_rule, parse_rules
from harness.report import CaseRecord, Report
from harness.report.serde import report_from_dict, report_to_dict
from harness.runners.tensorrt.typed_build import ParseFailure, TrtBuild
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE, record_for

BUILDS = TrtBuild(backend="TensorRT-RTX 1.7.1.116", outcome="ok", seconds=0.3, plan_bytes=4_000_000, checked=197)
REFUSED = TrtBuild(
    backend="TensorRT-RTX 1.7.1.116",
    outcome="parse",
    seconds=0.01,
    parse_failures=(
        ParseFailure("/bn1/act/HardSwish", "HardSwish", "bf16", "Only FLOAT, HALF or INT8 input is supported"),
    ),
)


def _record(build: TrtBuild | None) -> CaseRecord:
    return dataclasses.replace(record_for(SweepPoint(precision="bf16")), trt_build=build)


def test_trt_build_is_a_verdict_rule_without_threshold_and_recommended() -> None:
    assert parse_rule("trt_build").metric == "trt_build"
    with pytest.raises(UserError, match="trt_build takes no threshold"):
        parse_rule("trt_build:+1")
    assert "trt_build" in [rule.metric for rule in parse_rules(RECOMMENDED_RULES)]


def test_a_model_that_stops_building_regresses_and_one_that_starts_improves() -> None:
    rule = parse_rule("trt_build")
    worse = judge(_record(BUILDS), _record(REFUSED), rule)
    assert worse is not None and worse[0] is True
    assert worse[1].baseline == TRT_BUILDS and worse[1].now == REFUSED.summary() and fmt_change(worse[1]) == "worse"
    better = judge(_record(REFUSED), _record(BUILDS), rule)
    assert better is not None and better[0] is False and fmt_change(better[1]) == "better"
    assert judge(_record(BUILDS), _record(BUILDS), rule) is None
    assert judge(_record(None), _record(REFUSED), rule) is None  # not checked in the baseline: not judged


def test_the_field_survives_report_json_and_so_the_history() -> None:
    before = Report.build([_record(BUILDS)], created="2026-11-24T02:00:00+00:00", provenance=PROVENANCE)
    after = Report.build([_record(REFUSED)], created="2026-11-25T02:00:00+00:00", provenance=PROVENANCE)
    round_trip = report_from_dict(json.loads(json.dumps(report_to_dict(after))))
    assert round_trip.cases[0].trt_build == REFUSED
    verdict = compare_reports(round_trip, before, rules=parse_rules("status,trt_build"), source="baseline.json")
    assert not verdict and [c.rule.metric for c in verdict.regressions] == ["trt_build"]
    assert "does not build in TensorRT-RTX 1.7.1.116: HardSwish (bf16)" in comparison_markdown(verdict)
