"""One sweep case through AccuracySession + casework: every status, the record's contents, outputs and cache reuse."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.config import HarnessConfig
from harness.pipeline.session import AccuracySession, Case
from harness.report import load_outputs
from harness.runners import runner_traits
from harness.runners.tensorrt.library import installed_module
from harness.sweep import SweepPoint, SweepSpec
from tests.helpers.graphs import cancellation_model, mlp_model, save

ONE = SweepSpec(precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1], keep_io_types=(True,))


def _session(tmp_path: Path, model: Path, **config: object) -> AccuracySession:
    harness_config = HarnessConfig(
        models=(str(model),),
        goldens_dir=tmp_path / "goldens",
        report_dir=tmp_path / "report",
        cache_dir=tmp_path / "cache",
        **config,
    )  # type: ignore[arg-type]
    session = AccuracySession.open(harness_config, bundled_dir=tmp_path / "none")
    for name in session.models:
        session.check_fp32_golden(name)  # writes the golden on first use
    return session


def _case(session: AccuracySession, **settings: object) -> Case:
    return Case(next(iter(session.models)), SweepPoint(keep_io_types=True, **settings))  # type: ignore[arg-type]


@pytest.fixture
def mlp(tmp_path: Path) -> AccuracySession:
    return _session(tmp_path, save(mlp_model(), tmp_path / "mlp.onnx"), sweep=ONE)


def test_a_passing_case_records_everything(mlp: AccuracySession, tmp_path: Path) -> None:
    assert [c.id for c in mlp.cases] == ["mlp-fp16-dmax512-imax65504-excl_none-keepio1-emulate"]
    outcome = mlp.check_low_precision(mlp.cases[0])
    record = outcome.record
    assert outcome.status == "pass" and record is not None and record.status == "pass"
    assert (record.runner, record.rounds_low_precision, record.model) == ("emulate", True, "mlp")
    assert record.lowp_flop_share == 1.0 and record.cast_count == 2 and record.low_nodes == 3
    assert [o.name for o in record.outputs] == ["y"] and record.outputs[0].passed
    assert record.timings.magnitudes_s > 0 and record.timings.total_s >= record.timings.infer_s > 0
    assert record.outputs_file and record.golden_file and record.first_divergent is None
    saved = load_outputs(tmp_path / "report", record.outputs_file)
    assert list(saved[0]) == ["y"] and load_outputs(tmp_path / "report", record.golden_file)[0]["y"].shape == (1, 4)
    again = mlp.check_low_precision(_case(mlp, precision="bf16")).record
    assert again is not None and again.timings.magnitudes_s == 0.0  # shared work is charged once


def test_a_second_session_reuses_the_cache(mlp: AccuracySession, tmp_path: Path) -> None:
    first = mlp.check_low_precision(mlp.cases[0]).record
    fresh = _session(tmp_path, tmp_path / "mlp.onnx", sweep=ONE)
    second = fresh.check_low_precision(fresh.cases[0]).record
    assert first is not None and second is not None
    inputs = "inputs: seed 0, 1 iteration(s); x float32[1x8]: uniform in [-1, 1] (default; --val-range to change)"
    assert first.notes == (inputs,)  # the input plan on every case; a fresh golden: no drift
    assert second.notes == (inputs,) and second.conversion_cached and not first.conversion_cached
    assert second.timings.magnitudes_s == 0.0 and second.outputs == first.outputs


def test_a_failing_case_names_its_first_divergent_tensor(tmp_path: Path) -> None:
    session = _session(
        tmp_path, save(cancellation_model(), tmp_path / "cancel.onnx"), sweep=ONE, val_ranges=(("x", -0.5, 0.5),)
    )
    outcome = session.check_low_precision(session.cases[0])
    record = outcome.record
    assert outcome.status == "fail" and record is not None and record.first_divergent is not None
    assert (record.first_divergent.tensor, record.first_divergent.op) == ("y", "Sub")
    assert "cause: tensor 'y' from node 'sub' (Sub)" in outcome.message
    assert "verified: with 'sub', 'add' in FP32 this case passes" in outcome.message
    assert "--nodes_to_exclude 'add$' 'sub$'" in outcome.message and "golden: " in outcome.message


def test_ort_cpu_is_not_an_oracle_and_cannot_run_bf16(mlp: AccuracySession) -> None:
    fp16 = mlp.check_low_precision(_case(mlp, runner="ort"))
    assert fp16.status == "skip" and "not a low-precision oracle" in fp16.message and "would pass" in fp16.message
    assert fp16.record is not None and fp16.record.runner == "ort[CPUExecutionProvider]" and fp16.record.outputs
    bf16 = mlp.check_low_precision(_case(mlp, runner="ort", precision="bf16"))
    assert bf16.status == "skip" and "no bf16 kernels" in bf16.message and bf16.record is not None
    assert bf16.record.outputs == () and bf16.record.lowp_flop_share is None
    ort = runner_traits("ort")
    assert ort.cannot_run("ort", "bf16", ("CUDAExecutionProvider",)) is None
    assert ort.cannot_run("ort", "fp16", ("CPUExecutionProvider",)) is None


def test_a_conversion_error_is_an_error_record(mlp: AccuracySession) -> None:
    outcome = mlp.check_low_precision(_case(mlp, node_precisions=(("NoSuchNode", "fp16"),)))
    assert outcome.status == "error" and outcome.record is not None and outcome.record.status == "error"
    assert "match no node name or op type" in outcome.message and "np_NoSuchNode.fp16" in outcome.message


def test_an_unavailable_runner_is_a_skip_with_the_reason(mlp: AccuracySession) -> None:
    """No TensorRT (the main legs): the trt case skips saying so. TensorRT-RTX on this CPU (the trt leg): the model
    builds (the build check runs) and the case skips because nothing here can run the engine."""
    outcome = mlp.check_low_precision(_case(mlp, runner="trt"))
    assert outcome.status == "skip" and outcome.record is not None
    if installed_module() is None:
        assert outcome.message.startswith("no TensorRT is installed (neither tensorrt nor tensorrt_rtx_bindings)")
        assert outcome.record.trt_build is None
    else:
        assert outcome.record.trt_build is not None and outcome.record.trt_build.ok
        assert any(why in outcome.message for why in ("no CUDA library", "no usable CUDA device", "compute capability"))


def test_a_case_that_writes_the_golden_errors_once_with_its_record(tmp_path: Path) -> None:
    """Issue 33.1: a sweep case that wrote the golden (its golden test deselected, or run by another xdist
    worker) compared nothing: an error, recorded with where it stopped, and the next run compares."""
    config = HarnessConfig(
        models=(str(save(mlp_model(), tmp_path / "mlp.onnx")),),
        goldens_dir=tmp_path / "g",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        sweep=ONE,
    )
    session = AccuracySession.open(config, bundled_dir=tmp_path / "none")
    first = session.check_low_precision(session.cases[0])
    assert first.status == "error" and "golden written" in first.message and first.record is not None
    assert first.record.status == "error" and first.record.stopped == "golden_written"
    assert session.check_low_precision(session.cases[0]).status == "pass"


def test_fp32_accumulation_cases_have_their_own_id_and_conversion(mlp: AccuracySession) -> None:
    plain = mlp.check_low_precision(_case(mlp)).record
    acc = mlp.check_low_precision(_case(mlp, fp32_accumulation=True)).record
    assert plain is not None and acc is not None and acc.case_id.endswith("-acc32") and acc.status == "pass"
    assert acc.cast_count is not None and plain.cast_count is not None and acc.cast_count > plain.cast_count
    assert math.isclose(acc.outputs[0].max_abs, plain.outputs[0].max_abs, rel_tol=0.5, abs_tol=1e-3)
