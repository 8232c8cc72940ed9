"""The FLOP share through control flow, end to end: the number the converter computes is the one the sweep's
report.json and report.md, the nightly ``lowp_share`` rule and the best-passing-case pick read (issue 23 item 3)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.nightly.rules import metric
from harness.report.pareto import best_passing
from harness.report.serde import report_from_dict
from tests.helpers.convert_builders import F32, model, node, vi
from tests.helpers.graphs import save
from tests.unit.convert.test_flops_control_flow import MATMUL, ROWS, TINY, K, if_model, weight

pytest_plugins = ["pytester"]
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "true")


def _sweep(pytester: pytest.Pytester, graph: onnx.ModelProto) -> tuple[dict[str, object], str]:
    save(graph, pytester.path / "models" / "cf.onnx")
    pytester.runpytest("-p", "no:cacheprovider", "--model", "models/cf.onnx", "--runner", "emulate", *ONE_CASE)
    report_dir = pytester.path / "castguard-report"
    data = json.loads((report_dir / "report.json").read_text())
    return data, (report_dir / "report.md").read_text()


def test_if_model_share_reaches_every_consumer(pytester: pytest.Pytester) -> None:
    data, markdown = _sweep(pytester, if_model())
    (case,) = data["cases"]
    expected = 2 * TINY / (2 * TINY + 2 * MATMUL)  # Relu and Add low; the then branch's 2 MatMuls
    assert case["lowp_flop_share"] == pytest.approx(expected) and case["lowp_share_bound"] is None
    record = report_from_dict(data).cases[0]
    assert metric("lowp_share").read(record) == pytest.approx(expected)  # the nightly rule
    if record.status == "pass":
        assert best_passing([record]) is record
    assert f"{100 * expected:.1f}%" in markdown and "<= " not in markdown


def dynamic_loop_model() -> onnx.ModelProto:
    """The Loop's trip count is Size(t), computed at run time (4 iterations); its body s @ W stays FP32."""
    body = helper.make_graph(
        [node("MatMul", ["s_in", "W"], ["s_out"], "body_mm"), node("Identity", ["cond_in"], ["cond_out"], "body_cond")],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s_in", F32, [ROWS, K])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s_out", F32, [ROWS, K])],
        [weight("W", 4)],
    )
    return model(
        [
            node("Size", ["t"], ["n"], "trips"),
            node("Relu", ["x"], ["h"], "relu"),
            node("Loop", ["n", "", "h"], ["s"], "loop", body=body),
            node("Add", ["s", "h"], ["y"], "add"),
        ],
        [vi("x", F32, [ROWS, K]), vi("t", F32, [4])],
        [vi("y", F32, [ROWS, K])],
    )


def test_a_run_time_trip_count_is_reported_as_a_bound(pytester: pytest.Pytester) -> None:
    data, markdown = _sweep(pytester, dynamic_loop_model())
    (case,) = data["cases"]
    assert case["lowp_share_bound"] and "Loop 'loop'" in case["lowp_share_bound"]
    share = case["lowp_flop_share"]
    low = 2 * TINY + 1  # Relu, Add and Size (one output element; reads t in fp16)
    assert share == pytest.approx(low / (low + MATMUL + 1))  # one trip: the largest share
    assert f"<= {100 * share:.1f}%" in markdown
    assert "upper bound" in markdown and "'n' is computed at run time" in markdown
    assert np.isfinite(share)
