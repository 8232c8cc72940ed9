"""``castguard tune``'s exit code is a verdict: it tunes on several inputs and says which, feeds the inputs its hunt
finds over the bound back into the search, exits 0 only when the final plan holds on every input found, and
refuses a budget that runs out with less in low precision than the default conversion."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.cli import main
from harness.data.feeds import cast_feeds, input_specs
from harness.runners import make_runner
from harness.tune.bound import Bound, measure
from harness.tune.oracle import fp32_outputs
from test_models import tune_models
from tests.helpers.tune_heads import square_head, weights, worst_corner


def _tune(tmp: Path, model: Path, *extra: str) -> tuple[int, dict[str, object]]:
    code = main(
        ["tune", "--onnx_path", str(model), "--output_path", str(tmp / "out.onnx"), "--quiet", "--no_cache", *extra]
    )
    plan = tmp / "out.plan.json"
    return code, (json.loads(plan.read_text()) if plan.exists() else {})


def _error(fp32: onnx.ModelProto, converted: onnx.ModelProto, feed: dict[str, np.ndarray]) -> float:
    """max|y - gold| / max|gold| of ``converted`` on emulate at ``feed`` (inf when it overflows)."""
    gold = fp32_outputs(fp32, [feed], model_dir=None)
    got = make_runner("emulate", converted).run(cast_feeds([feed], input_specs(converted))).outputs
    return measure(got, gold, Bound(max_error=1.0)).ratio


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_hunt_finds_the_overflow_and_the_next_round_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    monkeypatch.chdir(tmp_path)
    model = square_head(seed=seed)
    path = tmp_path / "head.onnx"
    onnx.save(model, path)
    code, plan = _tune(tmp_path, path, "--max_error", "1e-2", "--seed", str(seed))
    out = capsys.readouterr().out
    assert code == 0 and plan["holds"] is True, out
    inputs = plan["inputs"]
    assert inputs["tuning"] == 8 and "random: 8 input(s)" in inputs["feeds"]  # type: ignore[index,operator]
    assert inputs["random_seed"] == seed and inputs["total"] == 9  # type: ignore[index]
    (counterexample,) = inputs["counterexamples"]  # type: ignore[index]
    assert counterexample["found_by"] == "corner search" and len(counterexample["inputs"]["x"]["values"]) == 256
    assert [len(r["kept_fp32"]) for r in plan["rounds"]] == [0, 2]  # type: ignore[attr-defined]
    assert "verdict: the plan holds on every tuning input and every input the hunt tried" in out
    assert "on 9 input(s): 8 tuning input(s) + 1 counterexample(s) found by the hunt" in out
    # independent check at the worst corner of the box (inside the tuning data's range)
    corner = {"x": (0.99 * worst_corner(weights(model), -1.0, 1.0)).astype(np.float32)[None, :]}
    assert _error(model, onnx.load(tmp_path / "out.onnx"), corner) <= 1e-2


def test_a_plan_that_does_not_hold_exits_1_writes_no_model_and_records_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    model = square_head()
    path = tmp_path / "head.onnx"
    onnx.save(model, path)
    code, plan = _tune(tmp_path, path, "--max_error", "1e-2", "--rounds", "0", "--random_inputs", "3")
    out = capsys.readouterr().out
    assert code == 1
    assert "verdict: the plan does NOT hold" in out and "NOT WRITTEN" in out
    assert "on 3 input(s): 3 tuning input(s) + 0 counterexample(s) found by the hunt" in out
    assert not (tmp_path / "out.onnx").exists() and plan["holds"] is False
    assert plan["inputs"]["tuning"] == 3  # type: ignore[index]
    (counterexample,) = plan["inputs"]["counterexamples"]  # type: ignore[index]
    # the recorded input really breaks the plan: replay the plan and run it there
    args = list(plan["replay"]["castguard_convert_args"])  # type: ignore[index]
    args[args.index("--output_path") + 1] = str(tmp_path / "replay.onnx")
    assert main(["convert", *args]) == 0
    x = np.asarray(counterexample["inputs"]["x"]["values"], dtype=np.float32).reshape(1, 256)
    assert _error(model, onnx.load(tmp_path / "replay.onnx"), {"x": x}) > 1e-2


def test_a_spent_budget_whose_plan_holds_is_written_when_the_default_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """residual_cancel's default conversion misses 1e-3 (tests/unit/tune/test_tune.py): a plan cut short by the
    budget that holds, with less in fp16 than that default, is still the best plan that holds (issue 32 item 1)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "residual_cancel.onnx"
    onnx.save(tune_models.residual_cancel(), path)
    code, plan = _tune(tmp_path, path, "--budget", "4", "--adversarial_examples", "0")
    out = capsys.readouterr().out
    assert code == 0 and plan["complete"] is False and (tmp_path / "out.onnx").is_file()
    assert "the default conversion misses the bound (error/bound " in out
    assert f"this plan holds at {100 * plan['lowp_flop_share']:.1f} %" in out  # type: ignore[operator]


@pytest.mark.parametrize(("budget", "problem"), [("2", "nothing in low precision")])
def test_a_spent_budget_that_leaves_less_than_the_default_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], budget: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "residual_cancel.onnx"
    onnx.save(tune_models.residual_cancel(), path)
    code, plan = _tune(tmp_path, path, "--budget", budget, "--adversarial_examples", "0")
    err = capsys.readouterr().err
    assert code == 2 and plan == {}
    assert f"the budget of {budget} evaluation(s) ran out before the search finished" in err and problem in err
    assert "fix: raise --budget" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["residual_cancel.onnx"]
