"""Each step of a case records its own time, and the named parts add up to the case's total (report.json)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import HarnessConfig
from harness.pipeline.session import AccuracySession
from harness.report import CaseRecord, Timings
from harness.sweep import SweepSpec
from tests.helpers.graphs import cancellation_model, mlp_model, save

EPSILON_S = 0.005  # what may pass between two steps (a few function calls), per case


def _records(tmp_path: Path, model: Path, spec: SweepSpec, **config: object) -> list[CaseRecord]:
    harness_config = HarnessConfig(
        models=(str(model),),
        goldens_dir=tmp_path / "goldens",
        report_dir=tmp_path / "report",
        cache_dir=tmp_path / "cache",
        sweep=spec,
        **config,
    )  # type: ignore[arg-type]
    session = AccuracySession.open(harness_config, bundled_dir=tmp_path / "none")
    name = next(iter(session.models))
    session.check_fp32_golden(name)
    records = [session.check_low_precision(case).record for case in session.cases]
    assert all(r is not None for r in records)
    return [r for r in records if r is not None]


def _adds_up(timings: Timings) -> None:
    assert timings.total_s > 0 and abs(timings.total_s - timings.parts_s) < EPSILON_S, timings


def test_the_parts_of_run_and_reused_cases_add_up_to_their_total(tmp_path: Path) -> None:
    spec = SweepSpec(
        precisions=("fp16",), data_max=(512.0, 1024.0), exclusions=SweepSpec().exclusions[:1], keep_io_types=(True,)
    )
    first, second = _records(tmp_path, save(mlp_model(), tmp_path / "mlp.onnx"), spec)
    assert first.status == "pass" and first.reused_from is None and second.reused_from == first.case_id
    t = first.timings
    assert t.magnitudes_s > 0 and t.convert_s > 0 and t.setup_s > 0 and t.infer_s > 0 and t.compare_s > 0
    assert t.dedup_s > 0 and t.record_s > 0 and t.diagnose_s == 0.0
    assert second.timings.infer_s == 0.0 and second.timings.setup_s == 0.0 and second.timings.dedup_s > 0
    for record in (first, second):
        _adds_up(record.timings)


def test_a_failing_case_times_its_diagnosis_and_still_adds_up(tmp_path: Path) -> None:
    spec = SweepSpec(
        precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1], keep_io_types=(True,)
    )
    (record,) = _records(
        tmp_path, save(cancellation_model(), tmp_path / "cancel.onnx"), spec, val_ranges=(("x", -0.5, 0.5),)
    )
    assert record.status == "fail" and record.first_divergent is not None
    assert record.timings.diagnose_s > 0
    _adds_up(record.timings)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])  # ort CPU: runs fp16 in fp32; cannot run bf16 at all
def test_a_case_the_runner_cannot_judge_adds_up(tmp_path: Path, precision: str) -> None:
    spec = SweepSpec(
        precisions=(precision,),
        data_max=(512.0,),
        exclusions=SweepSpec().exclusions[:1],
        keep_io_types=(True,),
        runners=("ort",),
    )
    (record,) = _records(tmp_path, save(mlp_model(), tmp_path / "mlp.onnx"), spec)
    assert record.status == "skip" and (record.timings.infer_s > 0) == (precision == "fp16")
    _adds_up(record.timings)
