"""The fix is run before it is printed, and the printed commands run as printed from another folder."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions
from harness.report.diagnosis import diagnosis_lines, profile_svg
from tests.helpers.diagnosis import (
    diagnose,
    fp32_nodes,
    graph_of,
    output_path_of,
    passes,
    run_printed,
    verified_model,
)
from tests.helpers.graphs import cancellation_model, make_model
from tests.helpers.llama import NORM_NODES, llama_feeds, llama_model

F32 = TensorProto.FLOAT


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my models"  # a space: the printed path must be quoted
    folder.mkdir()
    return folder


def test_llama_fix_is_verified_and_the_printed_command_writes_a_passing_model(tmp_path: Path) -> None:
    folder, elsewhere = _folder(tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    feeds = llama_feeds()
    found, path, goldens = diagnose(llama_model(), feeds, ConvertOptions(data_max=math.inf), folder)
    assert found.cause is not None and found.cause.node == "/m/norm/Pow"
    assert found.verified and set(found.fix_nodes) <= set(NORM_NODES) and "/m/norm/Pow" in found.fix_nodes
    assert 1 <= found.evaluations <= found.budget and found.fix_error is not None and found.fix_share is not None
    assert found.fix_share > 0.9 and found.tune_command == ""
    lines = "\n".join(diagnosis_lines(found, precision="fp16"))
    assert "verified: with '/m/norm/Pow', '/m/norm/ReduceMean' in FP32 this case passes (error " in lines
    assert "absorbed before the outputs (not the cause): '/m/model/Constant_28_output_0' (Constant)" in lines
    assert f"--onnx_path '{path}'" in found.command and "--data_max inf" in found.command
    done = run_printed(found.command, elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    fixed = onnx.load(str(output_path_of(found.command)))
    assert graph_of(fixed) == graph_of(verified_model(llama_model(), ConvertOptions(data_max=math.inf), found, feeds))
    assert all(fp32_nodes(fixed, found.fix_nodes).values())
    assert not fp32_nodes(fixed, ["/m/lm_head/MatMul"])["/m/lm_head/MatMul"]  # the rest stays fp16
    assert passes(fixed, feeds, goldens)


def test_a_finite_data_max_command_carries_the_golden_feeds_and_every_setting(tmp_path: Path) -> None:
    folder, elsewhere = _folder(tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    feeds = [{"x": np.random.default_rng(0).uniform(-0.5, 0.5, (1, 16)).astype(np.float32)}]
    options = ConvertOptions(
        data_max=1e4, init_max=60000.0, keep_io_types=True, op_types_to_exclude=("Relu",), target="ort-cuda"
    )
    found, _, goldens = diagnose(cancellation_model(), feeds, options, folder)
    assert found.verified and found.command
    for flag in (
        "--data_max 10000.0",
        "--init_max 60000.0",
        "--keep_io_types",
        "--op_types_to_exclude Relu",
        "--target ort-cuda",
        "--calibration_data '",
    ):
        assert flag in found.command
    done = run_printed(found.command, elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    fixed = onnx.load(str(output_path_of(found.command)))
    assert graph_of(fixed) == graph_of(verified_model(cancellation_model(), options, found, feeds))
    assert all(fp32_nodes(fixed, found.fix_nodes).values()) and passes(fixed, feeds, goldens)


def test_when_the_region_alone_fails_tunes_search_finds_a_fix_within_the_budget(tmp_path: Path) -> None:
    # y = (x + c) - c: the cancellation shows at the Sub, but the rounding is born in the Add before it
    feeds = [{"x": np.random.default_rng(0).uniform(-0.5, 0.5, (1, 16)).astype(np.float32)}]
    found, _, goldens = diagnose(cancellation_model(), feeds, ConvertOptions(keep_io_types=True), _folder(tmp_path))
    assert found.cause is not None and found.cause.node == "sub"
    assert found.verified and set(found.fix_nodes) == {"sub", "add"} and 1 < found.evaluations <= found.budget
    options = ConvertOptions(keep_io_types=True)
    assert passes(verified_model(cancellation_model(), options, found, feeds), feeds, goldens)


def test_no_fix_within_the_budget_says_so_and_prints_a_tune_command_that_runs(tmp_path: Path) -> None:
    folder, elsewhere = _folder(tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    feeds = [{"x": np.random.default_rng(0).uniform(-0.5, 0.5, (1, 16)).astype(np.float32)}]
    found, _, _ = diagnose(cancellation_model(), feeds, ConvertOptions(keep_io_types=True), folder, budget=1)
    assert not found.verified and found.command == "" and found.evaluations == 1
    lines = "\n".join(diagnosis_lines(found, precision="fp16"))
    assert "fix: not found within 1 evaluations" in lines and "verified" not in lines
    assert (
        found.tune_command.startswith("castguard tune --onnx_path '") and "--calibration_data '" in found.tune_command
    )
    done = run_printed(found.tune_command + " --no_cache --adversarial_examples 0", elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    assert output_path_of(found.tune_command).is_file()


def offset_model() -> onnx.ModelProto:
    """y = x - 1000 for x near 1000: an fp16 graph input alone (steps of 0.5 there) ruins y."""
    inits = [numpy_helper.from_array(np.array(1000.0, np.float32), "c")]
    return make_model(
        [helper.make_node("Sub", ["x", "c"], ["y"], name="sub")],
        [("x", F32, [1, 8])],
        [("y", F32, [1, 8])],
        initializers=inits,
    )


def test_a_case_with_nothing_in_low_precision_gets_no_node_advice(tmp_path: Path) -> None:
    feeds = [{"x": np.random.default_rng(0).uniform(1000, 1001, (1, 8)).astype(np.float32)}]
    options = ConvertOptions(op_types_to_exclude=("Sub",))  # every node FP32; the graph's I/O is fp16
    found, _, _ = diagnose(offset_model(), feeds, options, _folder(tmp_path))
    assert found.low_nodes == 0 and found.fix_nodes == () and found.command == "" and found.evaluations == 0
    lines = "\n".join(diagnosis_lines(found, precision="fp16"))
    assert "no node runs in fp16" in lines and "keep the sensitive" not in lines and "nodes_to_exclude" not in lines


def unnamed_overflow() -> onnx.ModelProto:
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Mul", ["sq", "small"], ["y"])]
    inits = [numpy_helper.from_array(np.array(1e-3, np.float32), "small")]
    return make_model(nodes, [("x", F32, [1, 4])], [("y", F32, [1, 4])], initializers=inits)


def test_an_unnamed_node_is_never_named_and_its_op_type_fix_is_verified(tmp_path: Path) -> None:
    folder, elsewhere = _folder(tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    feeds = [{"x": np.random.default_rng(0).uniform(300, 400, (1, 4)).astype(np.float32)}]
    found, _, goldens = diagnose(unnamed_overflow(), feeds, ConvertOptions(data_max=math.inf), folder)
    assert found.cause is not None and found.cause.node == "" and found.fix_nodes == ()
    assert found.verified and found.fix_ops == ("Mul",) and "--nodes_to_exclude" not in found.command
    lines = "\n".join(diagnosis_lines(found, precision="fp16"))
    assert "''" not in lines and "from an unnamed node (Mul)" in lines and "with every Mul node in FP32" in lines
    done = run_printed(found.command, elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    fixed = onnx.load(str(output_path_of(found.command)))
    options = ConvertOptions(data_max=math.inf)
    assert graph_of(fixed) == graph_of(verified_model(unnamed_overflow(), options, found, feeds))
    assert passes(fixed, feeds, goldens)


def test_the_profile_picture_marks_the_cause_and_the_fix(tmp_path: Path) -> None:
    found, _, _ = diagnose(llama_model(), llama_feeds(), ConvertOptions(data_max=math.inf), _folder(tmp_path))
    svg = profile_svg(found)
    assert svg.count("<circle") == len(found.profile) > 20
    assert 'class="cause"' in svg and "cause: /m/norm/Pow" in svg
    assert svg.count('class="fix"') == len(found.fix_nodes) == 2


def test_a_fix_that_cannot_run_is_reported_not_raised_and_not_called_verified(tmp_path: Path) -> None:
    from dataclasses import dataclass

    from harness.core.errors import RunnerError
    from harness.diagnose.verify import CaseSetup, case_bound, verify_fix
    from harness.judge.tolerances import TolerancePolicy

    @dataclass(frozen=True)
    class Broken(CaseSetup):
        def run(self, converted: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
            raise RunnerError("onnxruntime: the runner broke")

    model = cancellation_model()
    feeds = [{"x": np.random.default_rng(0).uniform(-0.5, 0.5, (1, 16)).astype(np.float32)}]
    setup = Broken(
        model=model,
        options=ConvertOptions(keep_io_types=True),
        magnitudes=None,  # type: ignore[arg-type]
        feeds=feeds,
        goldens=feeds,
        bound=case_bound(precision="fp16", policy=TolerancePolicy()),
        use_magnitudes=False,
    )
    outcome = verify_fix(setup, regions=[["sub"]], more=["add"], budget=8)
    assert not outcome.verified and outcome.evaluations == 1 and "the runner broke" in outcome.problem


def _two_norms_of_a_massive_activation() -> onnx.ModelProto:
    """r = x + a massive channel (1000: r*r = 1e6 overflows fp16), read by two RMS norms whose outputs both reach y:
    the cause is the first norm's x*x, and keeping only its region FP32 leaves the second one overflowing."""
    width = 32
    massive = np.zeros((1, width), np.float32)
    massive[0, 3] = 1000.0
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(massive, "massive"),
        numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
        *(numpy_helper.from_array((rng.standard_normal((width, 8)) * 0.2).astype(np.float32), w) for w in "ab"),
    ]
    nodes = [helper.make_node("Add", ["x", "massive"], ["r"], name="residual")]
    for side in "ab":
        nodes += [
            helper.make_node("Mul", ["r", "r"], [f"{side}_sq"], name=f"{side}_sq"),
            helper.make_node("ReduceMean", [f"{side}_sq"], [f"{side}_ms"], name=f"{side}_ms", axes=[-1]),
            helper.make_node("Add", [f"{side}_ms", "eps"], [f"{side}_var"], name=f"{side}_var"),
            helper.make_node("Sqrt", [f"{side}_var"], [f"{side}_rms"], name=f"{side}_rms"),
            helper.make_node("Div", ["r", f"{side}_rms"], [f"{side}_n"], name=f"{side}_n"),
            helper.make_node("MatMul", [f"{side}_n", side], [f"{side}_out"], name=f"{side}_out"),
        ]
    nodes.append(helper.make_node("Add", ["a_out", "b_out"], ["y"], name="y"))
    return make_model(nodes, [("x", F32, [1, width])], [("y", F32, [1, 8])], initializers=inits)


def test_every_out_of_range_region_is_tried_when_the_cause_s_alone_fails(tmp_path: Path) -> None:
    feeds = [{"x": np.random.default_rng(0).uniform(-1, 1, (1, 32)).astype(np.float32)}]
    options = ConvertOptions(data_max=math.inf, keep_io_types=True)
    model = _two_norms_of_a_massive_activation()
    found, _, goldens = diagnose(model, feeds, options, _folder(tmp_path))
    assert found.cause is not None and found.cause.node == "a_sq"
    region = {"a_sq", "a_ms"}  # the cause's region: r*r = 1e6 out of range, its mean (31250) back in
    alone = verified_model(model, options, replace(found, fix_nodes=tuple(region)), feeds)
    assert not passes(alone, feeds, goldens), "the test needs the cause's region alone to fail"
    assert found.verified and set(found.fix_nodes) == region | {"b_sq", "b_ms"}
    assert found.evaluations == 2  # the cause's region, then every out-of-range region: no search needed
    assert passes(verified_model(model, options, found, feeds), feeds, goldens)
    done = run_printed(found.command, tmp_path)
    assert done.returncode == 0 and passes(onnx.load(str(output_path_of(found.command))), feeds, goldens)
