"""Degenerate inputs said on every run (issue 33 item 11): a golden output that is all NaN, or that the inputs make
constant, is a typed fact of every case (``CaseRecord.degenerate``), shown in each run's summary and report, not
only once when the golden is written. Before, later runs said "N cases: N pass, worst error 0" and nothing else."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper

from harness.data.degenerate import Degenerate, degenerate
from harness.report.serde import record_from_dict, record_to_dict
from tests.helpers.graphs import make_model, save
from tests.helpers.report_samples import sample_report

pytest_plugins = ["pytester"]


def test_what_counts_as_degenerate() -> None:
    nan, ones = np.full((1, 4), np.nan, np.float32), np.ones((1, 4), np.float32)
    varied = np.arange(4, dtype=np.float32).reshape(1, 4)
    found = degenerate(
        [
            {"a": nan, "b": ones, "c": varied, "d": np.zeros((1, 4), np.int64)},
            {"a": nan, "b": ones, "c": varied, "d": np.zeros((1, 4), np.int64)},
        ]
    )
    assert found == (
        Degenerate(output="a", kind="not_finite", values=8),
        Degenerate(output="b", kind="constant", values=8, value=1.0),
    )
    assert degenerate([{"a": np.array([3.0], np.float32)}]) == ()  # one value: nothing to call constant
    assert degenerate([{"a": np.array([1.0, np.nan], np.float32)}]) == ()  # partly NaN: said when written
    assert degenerate([{"a": ones}, {"a": ones * 2}]) == ()  # varies across iterations
    with pytest.raises(ValueError, match="Degenerate.kind"):
        Degenerate(output="a", kind="odd", values=1)


def test_the_fact_round_trips_through_the_report() -> None:
    record = sample_report().cases[0]
    import dataclasses

    record = dataclasses.replace(record, degenerate=(Degenerate(output="y", kind="constant", values=4, value=0.0),))
    assert record_from_dict(json.loads(json.dumps(record_to_dict(record)))) == record


def test_every_run_says_it(pytester: pytest.Pytester) -> None:
    nodes = [helper.make_node("Log", ["x"], ["l"]), helper.make_node("Relu", ["l"], ["y"])]
    nodes.append(helper.make_node("Relu", ["x"], ["z"]))
    model = make_model(nodes, [("x", TensorProto.FLOAT, [1, 4])], [(n, TensorProto.FLOAT, [1, 4]) for n in "yz"])
    save(model, pytester.path / "models" / "m.onnx")
    val_range = "[-3,-1]"  # Log of a negative number: y all NaN; Relu of a negative number: z all 0
    args = ("-p", "no:randomly", "--model", "models/m.onnx", "--precision", "fp16", "--data-max", "512")
    args += ("--exclude-ops", "none", "--keep-io-types", "false", "--val-range", val_range)
    pytester.runpytest(*args).assert_outcomes(passed=1, failed=1)  # the golden is written
    for _ in range(2):  # every later run, not once
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=2)
        out = result.stdout.str()
        assert "degenerate golden: output 'y' is NaN/inf in all 4 values" in out
        assert "degenerate golden: output 'z' is 0 in all 4 values; the inputs do not exercise it" in out
    report = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    (case,) = report["cases"]
    assert case["degenerate"] == [
        {"output": "y", "kind": "not_finite", "values": 4, "value": None},
        {"output": "z", "kind": "constant", "values": 4, "value": 0.0},
    ]
    markdown = (pytester.path / "castguard-report" / "report.md").read_text()
    assert "degenerate golden: output 'z' is 0 in all 4 values" in markdown


def test_a_healthy_golden_says_nothing(pytester: pytest.Pytester) -> None:
    save(
        make_model(
            [helper.make_node("Relu", ["x"], ["z"])],
            [("x", TensorProto.FLOAT, [1, 4])],
            [("z", TensorProto.FLOAT, [1, 4])],
        ),
        pytester.path / "models" / "m.onnx",
    )
    args = ("-p", "no:randomly", "--model", "models/m.onnx", "--precision", "fp16", "--data-max", "512")
    args += ("--exclude-ops", "none", "--keep-io-types", "false")
    pytester.runpytest(*args)
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    assert "degenerate" not in result.stdout.str()
    report = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    assert report["cases"][0]["degenerate"] == []
