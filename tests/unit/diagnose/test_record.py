"""The diagnosis is typed facts on the record: report.json stores them and reads them back unchanged."""

from __future__ import annotations

import math

from harness.diagnose import Diagnosis, Divergence, TensorError
from harness.report import CaseRecord
from harness.report.serde import record_from_dict, record_to_dict
from harness.sweep import SweepPoint


def test_a_diagnosis_round_trips_through_report_json() -> None:
    diagnosis = Diagnosis(
        cause=Divergence(tensor="x2", node="/m/norm/Pow", op="Pow", max_abs=math.inf, max_rel=math.inf),
        profile=(
            TensorError(tensor="mask", node="/m/model/Where", op="Where", error=1.0, passed=False, computed=False),
            TensorError(tensor="x2", node="/m/norm/Pow", op="Pow", error=math.inf, passed=False, computed=True),
        ),
        fix_nodes=("/m/norm/Pow", "/m/norm/ReduceMean"),
        verified=True,
        fix_error=6.6e-4,
        fix_share=0.99,
        evaluations=1,
        budget=8,
        command="castguard convert --onnx_path '/a b/m.onnx'",
        low_nodes=22,
    )
    record = CaseRecord(
        model="m",
        model_sha256="0" * 64,
        case=SweepPoint(),
        status="fail",
        diagnosis=diagnosis,
        first_divergent=diagnosis.cause,
    )
    back = record_from_dict(record_to_dict(record))
    assert back.diagnosis == diagnosis and back == record
