"""The targeted search (harness.pipeline.hunt) on the bundled needs_constraints, through the suite's own code path.

Requirement: with Add and Sub forced to fp16 and no val-range, the search finds a failing input by itself within
the ``ci`` profile's budget; the default conversion survives the same search.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import settings
from onnx import TensorProto, helper, numpy_helper

from harness.cli import main as cli_main
from harness.config import HarnessConfig
from harness.core.errors import InputDataError
from harness.data.models import bundled_models_dir
from harness.judge.compare import Tolerance, compare_outputs
from harness.judge.paired import score
from harness.pipeline.hunt import cast_limits, failure_message, replay, search, search_case
from harness.pipeline.session import AccuracySession, Case
from harness.search.pairing import PairedRun as Judge
from harness.search.strategies import feeds
from harness.sweep import SweepPoint

pytest_plugins = ["pytester"]
MODEL = "needs_constraints"
FORCED = SweepPoint(node_precisions=(("Add", "fp16"), ("Sub", "fp16")))
CI = settings.get_profile("ci")


@pytest.fixture
def session(tmp_path: Path) -> AccuracySession:
    config = HarnessConfig(
        models=(MODEL,), goldens_dir=tmp_path / "goldens", report_dir=tmp_path / "report", cache_dir=tmp_path / "cache"
    )
    return AccuracySession.open(config, bundled_dir=bundled_models_dir())


def test_forced_fp16_add_sub_fails_within_the_ci_budget_without_a_val_range(session: AccuracySession) -> None:
    found = search_case(session, Case(MODEL, FORCED), profile=CI, hypothesis_note="ci")
    assert found.failed, f"no failure in {found.outcome.examples} inputs (best score {found.outcome.best_score})"
    assert found.outcome.examples <= CI.max_examples + 500  # search + shrinking, bounded by the ci profile
    x = found.outcome.feed["x"] if found.outcome.feed is not None else None
    assert x is not None and x.dtype == np.float16 and np.isfinite(x).all()  # the converted model's fp16 input
    assert found.domain == "every value the converted inputs hold"
    saved = found.saved
    assert saved is not None and saved.npz.parent == session.config.report_dir / "adversarial" / MODEL
    with np.load(saved.npz, allow_pickle=False) as data:
        assert data["x"].dtype == np.float32 and np.array_equal(data["x"], x.astype(np.float32))
    sidecar = json.loads(saved.sidecar.read_text())
    assert sidecar["replay"] == saved.command and sidecar["options"]["node_precisions"] == [
        ["Add", "fp16"],
        ["Sub", "fp16"],
    ]
    message = failure_message(Case(MODEL, FORCED), found)
    assert "Hypothesis found an input" in message and f"replay: {saved.command}" in message
    assert replay(saved.npz).failed
    assert cli_main(["replay", str(saved.npz)]) == 1


def test_the_default_conversion_survives_the_same_search(session: AccuracySession) -> None:
    for profile in (CI, settings()):
        found = search_case(session, Case(MODEL, SweepPoint()), profile=profile)
        assert not found.failed and found.outcome.feed is None
        assert found.outcome.examples >= min(profile.max_examples, 30) and found.outcome.best_score <= 1.0


def test_the_ci_search_is_reproducible(session: AccuracySession) -> None:
    first = search_case(session, Case(MODEL, FORCED), profile=CI).outcome
    second = search_case(session, Case(MODEL, FORCED), profile=CI).outcome
    assert first.feed is not None and second.feed is not None
    assert np.array_equal(first.feed["x"], second.feed["x"]) and first.examples == second.examples


def test_a_val_range_narrows_the_search(tmp_path: Path) -> None:
    config = HarnessConfig(
        models=(MODEL,),
        goldens_dir=tmp_path / "g",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        val_ranges=(("x", 0.0, 0.0),),
    )
    narrow = AccuracySession.open(config, bundled_dir=bundled_models_dir())
    found = search_case(narrow, Case(MODEL, FORCED), profile=CI)
    assert not found.failed and found.domain.startswith("x:[0,0]")  # x = 0 cannot overflow Add/Sub


def test_cast_limits_bound_fp32_inputs_the_model_casts_down(session: AccuracySession) -> None:
    golden, _ = session.golden(MODEL, allow_update=False)
    ctx, _ = session.context(MODEL, golden)
    from harness.convert import ConvertOptions, convert

    kept = convert(ctx.model, options=ConvertOptions(keep_io_types=True), magnitudes=ctx.magnitudes).model
    assert cast_limits(kept) == (("x", -65504.0, 65504.0),)
    assert cast_limits(kept, given=(("", 0.0, 1.0),)) == ()
    low_io = convert(ctx.model, options=ConvertOptions(), magnitudes=ctx.magnitudes).model
    assert cast_limits(low_io) == ()


def _scaled(scale: float) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "s"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(scale, np.float32), "s")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_an_fp32_overflow_is_not_a_low_precision_failure() -> None:
    model = _scaled(10.0)
    with Judge(model, model, precision="fp16") as judge:
        verdict = judge({"x": np.array([3e38, 1.0], np.float32)})
    assert not verdict.golden_finite and not verdict.failed


def test_score_is_error_over_tolerance() -> None:
    golden = {"y": np.array([1.0, 2.0])}
    ok = compare_outputs({"y": np.array([1.0, 2.0])}, golden, tolerances={}, default=Tolerance(atol=0.1, rtol=0.1))
    bad = compare_outputs({"y": np.array([1.0, 2.4])}, golden, tolerances={}, default=Tolerance(atol=0.1, rtol=0.1))
    inf = compare_outputs({"y": np.array([1.0, np.inf])}, golden, tolerances={}, default=Tolerance())
    assert score(ok) == 0.0 and score(bad) == pytest.approx(2.0) and score(inf) == 1e6


def test_search_returns_no_feed_when_nothing_fails() -> None:
    model = _scaled(1.0)
    with Judge(model, model, precision="fp16") as judge:
        outcome = search(judge, feeds(model, val_ranges=(("", -1.0, 1.0),)), profile=CI)
    assert outcome.feed is None and outcome.examples >= 1 and outcome.best_score == 0.0


def test_replay_refuses_a_changed_model(session: AccuracySession, tmp_path: Path) -> None:
    found = search_case(session, Case(MODEL, FORCED), profile=CI)
    assert found.saved is not None
    copy = tmp_path / "copy.onnx"
    shutil.copy(bundled_models_dir() / MODEL / f"{MODEL}.onnx", copy)
    doc = json.loads(found.saved.sidecar.read_text())
    found.saved.sidecar.write_text(json.dumps({**doc, "model": str(copy)}))
    assert replay(found.saved.npz).failed
    onnx.save(_scaled(2.0), copy)
    with pytest.raises(InputDataError, match="the model changed"):
        replay(found.saved.npz)
    assert cli_main(["replay", str(found.saved.npz)]) == 2
    old = subprocess.run(
        [sys.executable, "-m", "harness.adversarial", "replay", str(found.saved.npz)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert old.returncode == 2 and "the model changed" in old.stderr  # findings saved with the old command


def test_the_suite_selects_the_search_with_the_marker(pytester: pytest.Pytester) -> None:
    narrow = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")
    plain = pytester.runpytest("-p", "no:cacheprovider", "--model", MODEL, *narrow)
    plain.assert_outcomes(passed=1, failed=1)  # golden written once; no adversarial test
    forced = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--model",
        MODEL,
        "-m",
        "adversarial",
        *narrow,
        "--node-precisions",
        "Add:fp16,Sub:fp16",
    )
    forced.assert_outcomes(failed=1, deselected=2)
    forced.stdout.fnmatch_lines(
        [
            "*test_adversarial[[]needs_constraints-fp16-dmax512-*-np_Add.fp16+Sub.fp16[]]*",
            "*Hypothesis found an input on which the converted model misses its FP32 golden*",
            "*replay: castguard replay *.npz",
        ]
    )
    default = pytester.runpytest("-p", "no:cacheprovider", "--model", MODEL, "-m", "adversarial", *narrow)
    default.assert_outcomes(passed=1, deselected=2)


def test_the_hypothesis_seed_is_recorded_in_the_report(pytester: pytest.Pytester) -> None:
    narrow = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--model", MODEL, *narrow, "--hypothesis-seed", "4242"
    )
    result.assert_outcomes(passed=1, failed=1)  # the golden is written once
    report = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    assert report["provenance"]["hypothesis_profile"].endswith("(seed 4242)")
