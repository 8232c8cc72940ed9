"""Tune returns the best plan that holds (issue 32 item 1): where castguard convert's default misses the bound, a
plan that meets it is written (exit 0) and the summary says so, even when the budget cut the search short; the
refusal remains only where the default itself holds with more in low precision, and its hint is a true figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.cli import main
from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.core.errors import UserError
from harness.data.feeds import cast_feeds, input_specs
from harness.runners import make_runner
from harness.tune.baseline import DefaultCheck, Spent, refuse_short_plan, sized_budget
from harness.tune.bound import Bound, measure
from harness.tune.oracle import fp32_outputs

WIDTH, OFFSET = 16, 100.0


def centered_mlp(inputs: int) -> onnx.ModelProto:
    """Each input (values 100..101) minus 100, summed, then 4 x (MatMul, Tanh). In fp16 the Sub's input rounds to
    0.0625 steps: only a plan that keeps every Sub FP32 (inputs stay FP32: keep_io_types) meets 1e-3."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Sub", [f"x{i}", "offset"], [f"c{i}"], name=f"center{i}") for i in range(inputs)]
    inits = [numpy_helper.from_array(np.full((WIDTH,), OFFSET, np.float32), "offset")]
    total = "c0"
    for i in range(1, inputs):
        nodes.append(helper.make_node("Add", [total, f"c{i}"], [f"s{i}"], name=f"join{i}"))
        total = f"s{i}"
    for i in range(4):
        inits.append(numpy_helper.from_array((rng.uniform(-1, 1, (WIDTH, WIDTH)) / 4).astype(np.float32), f"W{i}"))
        nodes.append(helper.make_node("MatMul", [total, f"W{i}"], [f"m{i}"], name=f"fc{i}"))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"h{i}"], name=f"act{i}"))
        total = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "centered",
        [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [4, WIDTH]) for i in range(inputs)],
        [helper.make_tensor_value_info(total, TensorProto.FLOAT, [4, WIDTH])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _files(folder: Path, inputs: int) -> tuple[Path, Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    feed = {f"x{i}": (OFFSET + rng.uniform(0, 1, (4, WIDTH))).astype(np.float32) for i in range(inputs)}
    path, calib = folder / "centered model.onnx", folder / "calib.npz"
    onnx.save(centered_mlp(inputs), path)
    np.savez(calib, **feed)  # type: ignore[arg-type]
    return path, calib, feed


def _error(model: onnx.ModelProto, converted: onnx.ModelProto, feed: dict[str, np.ndarray]) -> float:
    """Independent check: emulate against ORT FP32, the bound's normalized max error."""
    gold = fp32_outputs(model, [feed], model_dir=None)
    got = make_runner("emulate", converted).run(cast_feeds([feed], input_specs(converted))).outputs
    return measure(got, gold, Bound()).ratio * 1e-3


@pytest.mark.parametrize(("inputs", "budget"), [(1, "auto"), (2, "4")])
def test_a_plan_that_holds_is_written_where_the_default_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], inputs: int, budget: str
) -> None:
    """inputs=2, budget 4: the search is cut short with a passing plan (both Subs FP32) that has less in fp16
    than the default; before, tune refused it (exit 2) although the default misses the bound."""
    monkeypatch.chdir(tmp_path)
    path, calib, feed = _files(tmp_path, inputs)
    model = onnx.load(path)
    options = ConvertOptions(keep_io_types=True)
    default = convert(model, options=options, magnitudes=collect_magnitudes(model, calibration_data=str(calib)))
    assert _error(model, default.model, feed) > 1e-3  # the default conversion misses the bound
    args = ["--calibration_data", str(calib), "--keep_io_types", "--adversarial_examples", "0", "--no_cache"]
    out = tmp_path / "out.onnx"
    code = main(["tune", "--onnx_path", str(path), "--output_path", str(out), "--budget", budget, "--quiet", *args])
    printed = capsys.readouterr().out
    assert code == 0 and out.is_file()
    plan = json.loads((tmp_path / "out.plan.json").read_text())
    assert sorted(plan["kept_fp32"]) == [f"center{i}" for i in range(inputs)]
    assert _error(model, onnx.load(out), feed) <= 1e-3
    measured = plan["default_conversion"]
    assert measured["holds"] is False and measured["error_over_bound"] > 1 and measured["lowp_flop_share"] > 0.99
    share = 100 * plan["lowp_flop_share"]
    assert "the default conversion misses the bound (error/bound " in printed
    assert f"this plan holds at {share:.1f} %" in printed and share > 95


def test_refusal_only_where_the_default_holds_with_more_and_its_hint_is_true() -> None:
    model = centered_mlp(1)
    plan = convert(model, options=ConvertOptions(nodes_to_exclude=("fc0", "fc1")), magnitudes=None)
    spent = Spent(budget=4, candidates=9, kept=2, rounds=3)
    missing = DefaultCheck(share=1.0, ratio=29.7, holds=False)
    refuse_short_plan(plan, default=missing, spent=spent)  # the default misses: the plan is written
    holding = DefaultCheck(share=1.0, ratio=0.5, holds=True)
    with pytest.raises(UserError) as err:
        refuse_short_plan(plan, default=holding, spent=spent)
    text = str(err.value)
    assert "less than the default conversion's 100.0% (which holds" in text
    assert "typical" not in text
    assert f"needs about {4 * (2 * 3 * 4 + 10)}" in text  # 4 rounds x (2*(2+1)*ceil(log2 9)+10)


def test_the_default_budget_grows_with_candidates_and_rounds() -> None:
    assert sized_budget(9, 0) < sized_budget(9, 3) < sized_budget(200, 3)
    assert sized_budget(200, 3) == 4 * (2 * (8 + 1) * 8 + 10)


def test_a_budget_spent_before_any_plan_gives_the_searchs_own_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path, calib, _ = _files(tmp_path, 1)
    args = ["--calibration_data", str(calib), "--keep_io_types", "--adversarial_examples", "0", "--no_cache"]
    code = main(["tune", "--onnx_path", str(path), "--output_path", str(tmp_path / "o.onnx"), "--budget", "1", *args])
    err = capsys.readouterr().err
    assert code == 2 and "typical" not in err
    assert "for 9 candidates a search that keeps K nodes FP32 needs about 2*(K+1)*log2(9)+10: 26 for one" in err
