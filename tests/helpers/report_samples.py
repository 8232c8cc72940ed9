"""Realistic synthetic sweep reports shared by the report tests (``tests.helpers.report_samples``).

The numbers imitate the mnist sweep: fp16 errors near 1e-3, bf16 near 1e-2, data_max=8 keeping the
large-activation nodes FP32 (a lower low-precision share), one bf16 overflow to inf, one conversion error.
"""

from __future__ import annotations

import math

from harness.report import CaseRecord, Divergence, OutputStats, Provenance, Report, Timings
from harness.sweep import SweepPoint, SweepSpec, expand

PROVENANCE = Provenance(
    castguard="0.1.0",
    onnx="1.23.2",
    onnxruntime="1.31.1",
    numpy="2.4.0",
    python="3.11.2",
    platform="Linux-x86_64",
    hostname="ci-runner",
    hypothesis_profile="ci",
    runners=("emulate",),
    git_commit="0123456789abcdef0123456789abcdef01234567",
)
SHA = "9f2c" * 16


def output_stats(name: str, max_rel: float, *, passed: bool, scale: float = 8.0) -> OutputStats:
    """Stats whose scaled error (max_abs / max|golden|) is a quarter of ``max_rel``."""
    max_abs = max_rel * scale / 4 if math.isfinite(max_rel) else max_rel
    return OutputStats(
        name=name,
        passed=passed,
        reason="" if passed else "40/100 elements over tolerance",
        max_abs=max_abs,
        mean_abs=max_abs / 5,
        median_abs=max_abs / 8,
        quantile_abs=max_abs / 2,
        max_rel=max_rel,
        mean_rel=max_rel / 6,
        median_rel=max_rel / 9,
        quantile_rel=max_rel / 2,
        n_over=0 if passed else 40,
        n_total=100,
        atol=0.03125,
        rtol=0.001953125,
        mode="elemwise",
        quantile=0.99,
        required_atol=max_abs,
        required_rtol=max_rel,
        golden_absmax=scale,
        top_k_agreement=None,
    )


def record_for(case: SweepPoint, *, model: str = "mnist") -> CaseRecord:
    """A plausible record for one mnist case (deterministic in the case's settings)."""
    share = {8.0: 0.58, 512.0: 0.93, math.inf: 1.0}[case.data_max] - (0.04 if case.exclusion.name != "none" else 0)
    base = 1.1e-3 if case.precision == "fp16" else 9.5e-3
    error = base * (1.0 + 0.8 * share) * (1.15 if case.keep_io_types else 1.0)
    status, message, divergent = "pass", "", None
    if case.precision == "bf16" and case.data_max == math.inf and case.exclusion.name == "none":
        error, status = (math.inf if case.keep_io_types else 0.31), "fail"
        message = "output 'Plus214_Output_0': 6/10 elements over atol=0.25 rtol=0.0156"
        divergent = Divergence(
            tensor="Convolution110_Output_0", node="Convolution110", op="Conv", max_abs=3.2, max_rel=error
        )
    if case.precision == "fp16" and case.data_max == 8.0 and case.exclusion.name == "sensitive" and case.keep_io_types:
        return CaseRecord(
            model=model,
            model_sha256=SHA,
            case=case,
            status="error",
            runner="emulate",
            inputs_id="file-1a2b3c4d",
            message="ConversionError: step validate: node 'Reshape_0'\n  fix: report this bug",
            timings=Timings(magnitudes_s=0.4, convert_s=0.1, total_s=0.5),
        )
    outputs = (output_stats("Plus214_Output_0", error, passed=status == "pass"),)
    return CaseRecord(
        model=model,
        model_sha256=SHA,
        case=case,
        status=status,
        runner="emulate",
        rounds_low_precision=True,
        inputs_id="file-1a2b3c4d",
        message=message,
        outputs=outputs,
        lowp_flop_share=share,
        cast_count=(2 if case.keep_io_types else 0) + round(8 * (1 - share)),
        low_nodes=round(12 * share),
        high_nodes=12 - round(12 * share),
        timings=Timings(magnitudes_s=0.42, convert_s=0.05, infer_s=0.08, compare_s=0.002, total_s=0.55),
        first_divergent=divergent,
        outputs_file=f"outputs/{model}/file-1a2b3c4d/{case.id}.npz",
        golden_file=f"outputs/{model}/file-1a2b3c4d/golden.npz",
    )


def constraint_records() -> list[CaseRecord]:
    """Seed 003: the default conversion passes, forcing Add to fp16 is a strict expected failure."""
    default = SweepPoint(precision="fp16", data_max=512.0)
    forced = SweepPoint(precision="fp16", data_max=math.inf, node_precisions=(("Add", "fp16"), ("Sub", "fp32")))
    ok = CaseRecord(
        model="needs_constraints",
        model_sha256="77" * 32,
        case=default,
        status="pass",
        runner="emulate",
        rounds_low_precision=True,
        inputs_id="seed0-it1-5d41402a",
        outputs=(output_stats("y", 0.0, passed=True, scale=2.0),),
        lowp_flop_share=0.5,
        cast_count=4,
    )
    bad = CaseRecord(
        model="needs_constraints",
        model_sha256="77" * 32,
        case=forced,
        status="xfail",
        runner="emulate",
        rounds_low_precision=True,
        inputs_id="seed0-it1-5d41402a",
        message="output 'y': 8/8 elements over tolerance (obtained 0, golden 1.0-2.0)",
        outputs=(output_stats("y", 1.0, passed=False, scale=2.0),),
        lowp_flop_share=0.75,
        cast_count=3,
        first_divergent=Divergence(tensor="add_out", node="Add", op="Add", max_abs=1.5, max_rel=1e-4),
    )
    return [ok, bad]


def sample_report() -> Report:
    """The 24-case default sweep over mnist plus the two seed-003 cases."""
    records = [record_for(case) for case in expand(SweepSpec(keep_io_types=(False, True)))] + constraint_records()
    return Report.build(records, created="2026-11-20T10:00:00+00:00", provenance=PROVENANCE)


HOSTILE = "<script>alert('x')</script>|`pipe`|**bold**\nline2 & $math$"


def hostile_report() -> Report:
    """A report whose model, tensor, runner and message text try to break markdown and HTML."""
    case = SweepPoint(precision="fp16", node_precisions=((HOSTILE, "fp32"),))
    record = CaseRecord(
        model=HOSTILE,
        model_sha256=SHA,
        case=case,
        status="fail",
        runner=HOSTILE,
        inputs_id="seed0",
        message=HOSTILE,
        outputs=(output_stats(HOSTILE, 0.5, passed=False),),
        lowp_flop_share=0.5,
        cast_count=3,
        first_divergent=Divergence(tensor=HOSTILE, node=HOSTILE, op="Add", max_abs=1.0, max_rel=0.5),
    )
    return Report.build([record], created="2026-11-20T10:00:00+00:00", provenance=PROVENANCE)
