"""The reference run's in-graph reductions (issue 26) give the copy path's figures, bit for bit, and the same
converted models: on every bundled model, on models built here for the edge cases (NaN, inf, -0.0, empty
tensors, int64's minimum, bool, fp16, double, If/Loop/Scan outputs), and on a sample of the stored ONNX node
tests (all of them with CASTGUARD_ALL_NODE_TESTS=1). Also: the per-tensor fallback, the whole fallback, CUDA's
fallback to the CPU, and a fold that keeps no batch."""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.convert import ConvertOptions, convert
from harness.convert.magnitudes import Magnitudes
from harness.convert.reductions import denominators
from harness.convert.reference import ReductionPath, ReferenceData, ReferenceRun, reference_run
from harness.core.errors import ConversionError
from test_models import MODELS
from tests.helpers.convert_builders import F32, init, model, node, vi

F16, F64, I64, BOOL = TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.BOOL


PLAIN = ReferenceData(dynamic_default=None)  # collect_magnitudes's defaults
FULL = ReductionPath(absmin_everywhere=True, raw_below=-1)  # absmin everywhere, no tensor copied out


def _both(
    source: onnx.ModelProto | Path, data: ReferenceData = PLAIN, *, feeds: list[dict[str, np.ndarray]] | None = None
) -> tuple[ReferenceRun, ReferenceRun, ReferenceRun]:
    """(copy path, graph path with absmin everywhere and no tensor copied out, graph path as the converter runs
    it)."""
    copy = reference_run(source, data, feeds=feeds, path=ReductionPath(reduce="copy"))
    full = reference_run(source, data, feeds=feeds, path=FULL)
    default = reference_run(source, data, feeds=feeds)
    return copy, full, default


def _assert_same(copy: Magnitudes, graph: Magnitudes, *, absmin_names: set[str] | None = None) -> None:
    assert graph.absmax == copy.absmax
    assert graph.shapes == copy.shapes and graph.dtypes == copy.dtypes
    assert all(math.copysign(1, v) == 1 for v in graph.absmax.values())  # never -0.0
    if absmin_names is None:
        assert graph.absmin == copy.absmin
    else:
        assert {k: v for k, v in copy.absmin.items() if k in absmin_names} == {
            k: v for k, v in graph.absmin.items() if k in absmin_names
        }
    assert graph == Magnitudes(
        absmax=copy.absmax,
        shapes=copy.shapes,
        dtypes=copy.dtypes,
        data_source=copy.data_source,
        batches=copy.batches,
        absmin=graph.absmin,
    )


def _check_equivalent(source: onnx.ModelProto | Path, data: ReferenceData) -> ReferenceRun:
    copy, full, default = _both(source, data)
    assert full.reduce == "graph" and default.reduce == "graph" and copy.reduce == "copy"
    _assert_same(copy.magnitudes, full.magnitudes)
    loaded = source if isinstance(source, onnx.ModelProto) else onnx.load(source)
    _assert_same(
        copy.magnitudes, default.magnitudes, absmin_names=denominators(loaded) | {i.name for i in loaded.graph.input}
    )
    for options in (ConvertOptions(), ConvertOptions(low_precision_type="bf16", keep_io_types=True)):
        before = convert(loaded, options=options, magnitudes=copy.magnitudes).model
        after = convert(loaded, options=options, magnitudes=default.magnitudes).model
        assert after.SerializeToString() == before.SerializeToString()
    return default


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bundled_model_same_figures_and_same_conversion(name: str) -> None:
    spec = MODELS[name]
    if spec.inputs_file:  # the model's own inputs, split into batches as calibration data is
        run = _check_equivalent(spec.path, replace(PLAIN, calibration_data=spec.folder / spec.inputs_file))
    else:
        run = _check_equivalent(spec.path, ReferenceData(dynamic_default=64))
    assert run.copied == ()


def _edge_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Every kind of tensor the reductions must get right, fed data with NaN, inf, -0.0, subnormals."""
    then_g = helper.make_graph(
        [node("Mul", ["x", "k"], ["then_out"], "then_mul")], "then", [], [vi("then_out", F32, None)]
    )
    else_g = helper.make_graph([node("Neg", ["x"], ["else_out"], "else_neg")], "else", [], [vi("else_out", F32, None)])
    body = helper.make_graph(
        [
            node("Add", ["acc_in", "x"], ["acc_out"], "body_add"),
            node("Identity", ["cond_in"], ["cond_out"], "body_cond"),
            node("Identity", ["acc_out"], ["scan_out"], "body_scan"),
        ],
        "body",
        [vi("iter", I64, []), vi("cond_in", BOOL, []), vi("acc_in", F32, None)],
        [vi("cond_out", BOOL, []), vi("acc_out", F32, None), vi("scan_out", F32, None)],
    )
    scan_body = helper.make_graph(
        [node("Add", ["s_in", "row"], ["s_out"], "scan_add"), node("Identity", ["s_out"], ["s_row"], "scan_id")],
        "scan_body",
        [vi("s_in", F32, [4]), vi("row", F32, [4])],
        [vi("s_out", F32, [4]), vi("s_row", F32, [4])],
    )
    nodes = [
        node("Div", ["x", "x"], ["nan_div"], "nan_div"),  # 0/0 = NaN where x is 0
        node("Div", ["one", "x"], ["inv"], "inv"),  # 1/0 = inf, divisor x (absmin)
        node("Mul", ["x", "tiny"], ["scaled_tiny"], "scaled_tiny"),  # subnormals
        node("Neg", ["x"], ["neg"], "neg"),
        node("Cast", ["x"], ["half"], "half", to=F16),
        node("Cast", ["half"], ["back"], "back", to=F32),
        node("Cast", ["x"], ["wide"], "wide", to=F64),
        node("Div", ["one64", "wide"], ["inv64"], "inv64"),
        node("Cast", ["x"], ["ints"], "ints", to=I64),
        node("Add", ["ints", "lowest"], ["lowest_sum"], "lowest_sum"),  # holds int64's minimum
        node("Greater", ["x", "zero"], ["positive"], "positive"),
        node("Cast", ["x"], ["bytes"], "bytes", to=TensorProto.UINT8),
        node("Cast", ["x"], ["shorts"], "shorts", to=TensorProto.INT16),
        node("Slice", ["x", "start", "start", "axis0"], ["empty"], "empty"),  # a zero-size tensor
        node("ReduceMax", ["x"], ["flag"], "flag", keepdims=0),
        node("Greater", ["flag", "zero"], ["cond"], "cond"),
        node("If", ["cond"], ["branch"], "branch", then_branch=then_g, else_branch=else_g),
        node("Loop", ["trip", "true", "x"], ["looped", "stacked"], "loop", body=body),
        node("Scan", ["init_row", "x"], ["scanned", "rows"], "scan", body=scan_body, num_scan_inputs=1),
        node("Shape", ["x"], ["shape"], "shape"),
        node("Relu", ["neg"], ["relu"], "relu"),  # the non-negative ops: no ReduceMin
        node("Sqrt", ["x"], ["sqrt"], "sqrt"),  # NaN below zero, -0.0 at -0.0
        node("Softmax", ["x"], ["soft"], "soft", axis=-1),
        node("Exp", ["x"], ["exp"], "exp"),  # overflows to inf
        node("Cast", ["x"], ["int32"], "int32", to=TensorProto.INT32),
        node("Cast", ["x"], ["int8"], "int8", to=TensorProto.INT8),
    ]
    inits = [
        init("one", np.array(1, np.float32)),
        init("one64", np.array(1, np.float64)),
        init("tiny", np.array(1e-40, np.float32)),
        init("k", np.array(-3, np.float32)),
        init("lowest", np.array(np.iinfo(np.int64).min, np.int64)),
        init("zero", np.array(0, np.float32)),
        init("start", np.array([1], np.int64)),
        init("axis0", np.array([0], np.int64)),
        init("trip", np.array(3, np.int64)),
        init("true", np.array(True)),
        init("init_row", np.zeros(4, np.float32)),
    ]
    outputs = [vi("inv", F32, None), vi("back", F32, None), vi("ints", I64, None), vi("positive", BOOL, None)]
    built = model(nodes, [vi("x", F32, [3, 4])], outputs, inits, opset=17)
    x = np.array([[0.0, -0.0, 2.5, -7.0], [1e-3, -4e-39, 65504.0, 3.0], [-0.0, 0.25, -1.5, 1e5]], np.float32)
    return built, {"x": x}


def test_edge_cases_same_figures_as_the_copy_path() -> None:
    built, feed = _edge_model()
    copy, full, _ = _both(built, feeds=[feed, {"x": -feed["x"] * 2}])
    _assert_same(copy.magnitudes, full.magnitudes)
    got = full.magnitudes
    assert got.absmax["nan_div"] == math.inf and got.absmax["inv"] == math.inf  # NaN and inf seen
    assert got.absmin["inv"] == pytest.approx(1 / 2e5, rel=1e-6)  # second batch: -2x
    assert got.absmax["lowest_sum"] == float(2**63)  # |int64 min|, as float64
    assert got.absmax["positive"] == 1.0 and got.absmax["empty"] == 0.0 and got.shapes["empty"] == (0, 4)
    assert (
        got.absmin["scaled_tiny"] == float(np.float32(4e-39) * np.float32(1e-40)) or got.absmin["scaled_tiny"] > 0
    )  # a subnormal, not flushed
    assert got.absmax["half"] == 131008.0 or got.absmax["half"] == math.inf  # fp16 overflow of 2 x 65504
    assert got.dtypes["half"] == F16 and got.dtypes["wide"] == F64 and got.dtypes["bytes"] == TensorProto.UINT8
    for name in ("branch", "looped", "stacked", "scanned", "rows"):  # control-flow outputs
        assert name in got.absmax and name in got.shapes
    assert got.shapes["stacked"] == (3, 3, 4) and full.copied == ()
    assert got.absmax["sqrt"] == math.inf and got.absmax["exp"] == math.inf and got.absmax["relu"] == 2e5
    assert got.absmax["int32"] == 2e5 and 0 < got.absmax["soft"] <= 1


def test_opset_18_axes_input_and_opset_7() -> None:
    for opset in (7, 13, 18, 21):
        built = model(
            [node("Div", ["x", "y"], ["q"], "q"), node("Abs", ["q"], ["z"], "z")],
            [vi("x", F32, [2, 3]), vi("y", F32, [2, 3])],
            [vi("z", F32, [2, 3])],
            opset=opset,
        )
        x = np.array([[0.0, 1e-30, -2.0], [4.0, -0.0, 7.0]], np.float32)
        copy, full, default = _both(built, feeds=[{"x": x, "y": x[::-1].copy()}])
        _assert_same(copy.magnitudes, full.magnitudes)
        assert default.magnitudes.absmin.get("y") == copy.magnitudes.absmin.get("y")


def test_untyped_tensor_is_copied_out_whole_and_named(caplog: pytest.LogCaptureFixture) -> None:
    """A contrib op onnx inference cannot type: that tensor alone comes out whole; the rest is reduced in-graph."""
    built = model(
        [
            node("Relu", ["x"], ["r"], "relu"),
            helper.make_node("FastGelu", ["r"], ["g"], name="gelu", domain="com.microsoft"),
            node("Neg", ["r"], ["n"], "neg"),
        ],
        [vi("x", F32, [2, 8])],
        [onnx.ValueInfoProto(name="g"), vi("n", F32, [2, 8])],
        extra_opsets=[("com.microsoft", 1)],
    )
    feed = {"x": np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)}
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        copy, full, _ = _both(built, feeds=[feed])
    assert full.copied == ("g",) and full.reduce == "graph"
    assert "1 tensor(s) copied out whole" in caplog.text and ": g" in caplog.text
    _assert_same(copy.magnitudes, full.magnitudes)


def test_reductions_refused_fall_back_to_the_copy_path_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Wrong types for the added nodes (as a wrong inference would give): onnxruntime refuses them at load, and
    the run is redone the former way, said once, with the same figures."""
    from harness.convert import reference as module

    built, feed = _edge_model()
    copy = reference_run(built, PLAIN, feeds=[feed], path=ReductionPath(reduce="copy"))
    facts = module.tensor_facts

    def wrong(child: onnx.ModelProto, first: dict[str, np.ndarray]) -> object:
        right = facts(child, first)
        return type(right)(types={**right.types, "wide": F32}, ranks=right.ranks, sizes=right.sizes)

    monkeypatch.setattr(module, "tensor_facts", wrong)  # "wide", a double divisor, said float: absmin nodes mismatch
    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        run = reference_run(built, PLAIN, feeds=[feed], path=ReductionPath(raw_below=-1))
    assert run.reduce == "copy" and run.magnitudes == copy.magnitudes
    assert [r.message for r in caplog.records].count(run.notes[-1]) == 1
    assert "refused the in-graph reductions" in run.notes[-1]


def test_model_errors_are_unchanged_on_the_graph_path() -> None:
    """An onnxruntime error in the model's own node is reported as before (not taken for a refused reduction)."""
    graph = model(
        [node("Reshape", ["x", "shape"], ["r"], "reshape_3rows"), node("Relu", ["r"], ["y"], "relu")],
        [vi("x", F32, ["n", 4])],
        [vi("y", F32, [3, None])],
        [init("shape", np.array([3, -1], np.int64))],
    )
    errors = []
    for reduce in ("copy", "graph"):
        with pytest.raises(ConversionError) as err:
            reference_run(graph, ReferenceData(dynamic_default=1), path=ReductionPath(reduce=reduce))
        errors.append((err.value.node, err.value.problem))
    assert errors[0] == errors[1] and errors[0][0] == "reshape_3rows"


def test_cuda_unavailable_falls_back_to_cpu_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA: the fallback path is for CPU-only installs")
    built, feed = _edge_model()
    cpu = reference_run(built, PLAIN, feeds=[feed], path=ReductionPath(raw_below=-1))
    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        run = reference_run(
            built, replace(PLAIN, providers=("cuda:0",)), feeds=[feed], path=ReductionPath(raw_below=-1)
        )
    warnings = [r.message for r in caplog.records if "CUDAExecutionProvider" in r.message]
    assert len(warnings) == 1 and "uses the CPU" in warnings[0]
    assert run.providers == ("CPUExecutionProvider",) and run.magnitudes == cpu.magnitudes


def test_fold_keeps_no_batch(tmp_path: Path) -> None:
    """200 batches of 2 MB each: the reference process's peak memory is that of a few batches' run, not 400 MB
    more (the fold keeps running figures only, on both paths)."""
    built = model(
        [node("Mul", ["x", "k"], ["m"], "mul"), node("Relu", ["m"], ["y"], "relu")],
        [vi("x", F32, [1, 512, 1024])],
        [vi("y", F32, [1, 512, 1024])],
        [init("k", np.array(2, np.float32))],
    )
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "calib.npz", x=rng.standard_normal((200, 512, 1024), np.float32))
    many = reference_run(built, replace(PLAIN, calibration_data=tmp_path / "calib.npz"))
    np.savez(tmp_path / "two.npz", x=rng.standard_normal((2, 512, 1024), np.float32))
    few = reference_run(built, replace(PLAIN, calibration_data=tmp_path / "two.npz"))
    assert many.magnitudes.batches == 200 and few.magnitudes.batches == 2
    assert many.peak_rss_mb - few.peak_rss_mb < 40, (many.peak_rss_mb, few.peak_rss_mb)


NODE_DATA = Path(__file__).resolve().parents[2] / "data" / "onnx_node_data"
_ALL = sorted(p.parent.name for p in NODE_DATA.glob("*/model.onnx"))
NODE_SAMPLE = _ALL if os.environ.get("CASTGUARD_ALL_NODE_TESTS") else _ALL[::5]


@pytest.mark.parametrize("name", NODE_SAMPLE)
def test_stored_node_test_same_figures(name: str) -> None:
    """Same figures or the same error; the one difference allowed: a bfloat16 tensor, which the copy path cannot
    return to numpy (onnxruntime: 'No corresponding Numpy type'), is reduced in-graph."""
    source = onnx.load(NODE_DATA / name / "model.onnx")
    inputs = sorted((NODE_DATA / name).glob("test_data_set_0/input_*.pb"))
    data, feeds = ReferenceData(dynamic_default=4), None
    if inputs and len(inputs) == len([i for i in source.graph.input]):
        arrays = [onnx.numpy_helper.to_array(onnx.load_tensor(str(p))) for p in inputs]
        if all(isinstance(a, np.ndarray) and a.dtype.kind in "fiub" for a in arrays):
            data, feeds = PLAIN, [{vi_.name: a for vi_, a in zip(source.graph.input, arrays)}]
    outcomes: list[object] = []
    for reduce in ("copy", "graph"):
        try:
            outcomes.append(reference_run(source, data, feeds=feeds, path=replace(FULL, reduce=reduce)))
        except Exception as err:  # noqa: BLE001 - the two paths must fail alike
            outcomes.append(err)
    copy, graph = outcomes
    if isinstance(copy, Exception):
        if "No corresponding Numpy type" in str(copy) and isinstance(graph, ReferenceRun):
            return
        scratch = re.compile(r"castguard-ref-[^/]+")  # the child's scratch folder, new each run
        assert type(graph) is type(copy) and scratch.sub("", str(graph)) == scratch.sub("", str(copy))
        return
    assert isinstance(graph, ReferenceRun), graph
    assert isinstance(copy, ReferenceRun)
    _assert_same(copy.magnitudes, graph.magnitudes)
