"""report.json round trips, refusals, saved outputs, provenance."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.core.dtypes import BFLOAT16
from harness.core.errors import UserError
from harness.judge.compare import Tolerance, compare_outputs
from harness.report import (
    CaseRecord,
    OutputStats,
    Report,
    collect_provenance,
    golden_relpath,
    load_outputs,
    outputs_relpath,
    read_report,
    save_outputs,
    write_report,
)
from harness.report.figures import output_stats
from harness.report.serde import record_from_dict, record_to_dict, report_from_dict, report_to_dict
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE, hostile_report, sample_report
from tests.helpers.report_samples import output_stats as made_up_stats


@pytest.fixture(scope="module")
def sample_json() -> str:
    return json.dumps(report_to_dict(sample_report()), indent=1, allow_nan=False)


def test_json_round_trips_exactly(tmp_path: Path) -> None:
    for report in (sample_report(), hostile_report()):
        paths = write_report(report, tmp_path)
        back = read_report(paths.json)
        assert back == report
        assert json.dumps(report_to_dict(back), allow_nan=False) == json.dumps(report_to_dict(report))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.json", "report.md"]


def test_json_is_standard_and_carries_derived_fields(sample_json: str) -> None:
    data = json.loads(sample_json, parse_constant=_refuse)
    assert data["schema_version"] == 2 and data["summary"]["error"] == 1
    case = next(c for c in data["cases"] if c["worst_max_rel"] == "inf")
    assert case["case_id"] == "bf16-dmaxinf-imax65504-excl_none-keepio1-emulate"
    assert case["outputs"][0]["max_abs"] == "inf"


def _refuse(constant: str) -> float:
    raise AssertionError(f"non-standard JSON constant {constant}")


def test_nan_survives_the_round_trip() -> None:
    record = _record(made_up_stats("y", math.nan, passed=False))
    back = report_from_dict(json.loads(json.dumps(report_to_dict(_report(record)))))
    assert math.isnan(back.cases[0].outputs[0].max_rel)
    assert back.cases[0].worst_max_rel == math.inf


@pytest.mark.parametrize("version", [3, 0, "1", None, True])
def test_unknown_schema_version_is_refused_naming_the_file(tmp_path: Path, sample_json: str, version: object) -> None:
    data = json.loads(sample_json)
    data["schema_version"] = version
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="schema_version") as err:
        read_report(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: "\x00\xff garbage",
        lambda text: text.replace('"status": "pass"', '"status": "great"', 1),
        lambda text: text.replace('"case_id": "bf16-', '"case_id": "bf32-', 1),  # id no longer matches its settings
        lambda text: text.replace('"n_total": 100', '"n_total": 100.5', 1),
        lambda text: text.replace('"inputs_id"', '"surprise": 1, "inputs_id"', 1),
        lambda text: "[]",
    ],
)
def test_corrupt_reports_are_user_errors_naming_the_file(tmp_path: Path, sample_json: str, mutate) -> None:
    path = tmp_path / "report.json"
    path.write_text(mutate(sample_json))
    with pytest.raises(UserError) as err:
        read_report(path)
    assert str(path) in str(err.value)


def test_missing_report_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        read_report(tmp_path / "report.json")


def test_report_refuses_unsorted_or_repeated_cases() -> None:
    records = list(sample_report().cases)
    with pytest.raises(ValueError, match="sorted"):
        Report(created="t", provenance=PROVENANCE, cases=tuple(reversed(records)))
    with pytest.raises(ValueError, match="repeats"):
        Report.build(records + records[:1], created="t", provenance=PROVENANCE)


def test_output_stats_copy_a_real_comparison() -> None:
    golden = {"y": np.array([1.0, 2.0, 4.0], np.float32)}
    obtained = {"y": np.array([1.0, 2.0, 4.5], np.float16)}
    tol = Tolerance(atol=0.1, rtol=0.05, mode="elemwise")
    (stats,) = output_stats(compare_outputs(obtained, golden, tolerances={}, default=tol), [golden])
    assert (stats.passed, stats.max_abs, stats.max_rel, stats.n_over, stats.n_total) == (False, 0.5, 0.125, 1, 3)
    assert (stats.golden_absmax, stats.scaled_error) == (4.0, 0.125)
    assert (stats.atol, stats.rtol, stats.mode) == (0.1, 0.05, "elemwise")
    assert all(type(getattr(stats, f.name)) is not np.float64 for f in dataclasses.fields(stats))


@pytest.mark.parametrize(
    ("max_abs", "absmax", "scaled"),
    [(0.5, 4.0, 0.125), (0.0, 0.0, 0.0), (1e-3, 0.0, math.inf), (math.inf, 2.0, math.inf)],
)
def test_scaled_error_relates_the_error_to_the_outputs_scale(max_abs: float, absmax: float, scaled: float) -> None:
    stats = dataclasses.replace(made_up_stats("y", 0.1, passed=True), max_abs=max_abs, golden_absmax=absmax)
    assert stats.scaled_error == scaled
    nan = dataclasses.replace(stats, max_abs=math.nan)
    assert math.isnan(nan.scaled_error) and _record(nan).worst_error == math.inf


def test_outputs_npz_round_trip_and_stays_inside_the_folder(tmp_path: Path) -> None:
    runs = [
        {"logits": np.array([1.5, -2.0], np.float16), "idx": np.array([3], np.int64)},
        {"logits": np.array([0.5, 7.0], BFLOAT16), "idx": np.array([1], np.int64)},
    ]
    rel = outputs_relpath("mnist", "seed0-it2-abc", "fp16-dmax512-imax65504-excl_none-keepio0-emulate")
    save_outputs(tmp_path, rel, runs)
    back = load_outputs(tmp_path, rel)
    assert [sorted(it) for it in back] == [["idx", "logits"], ["idx", "logits"]]
    assert back[0]["logits"].dtype == np.float32 and back[1]["logits"].tolist() == [0.5, 7.0]
    assert back[0]["idx"].tolist() == [3]
    assert golden_relpath("mnist", "seed0-it2-abc") == "outputs/mnist/seed0-it2-abc/golden.npz"
    for escape in ("../outside.npz", "/etc/passwd", "outputs/../../x.npz"):
        with pytest.raises(UserError, match="leaves the report folder"):
            load_outputs(tmp_path, escape)


def test_hostile_names_give_distinct_safe_paths() -> None:
    a, b = outputs_relpath("../a b", "s", "c"), outputs_relpath("../a:b", "s", "c")
    assert a != b and ".." not in a.split("/")


def test_unreadable_outputs_are_user_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(UserError, match="unreadable"):
        load_outputs(tmp_path, "bad.npz")


def test_collect_provenance_reads_installed_versions(tmp_path: Path) -> None:
    prov = collect_provenance(hypothesis_profile="ci", runners=("emulate",), project_dir=tmp_path)
    assert prov.onnx == __import__("onnx").__version__ and prov.numpy == np.__version__
    assert prov.git_commit is None and prov.runners == ("emulate",)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert collect_provenance(hypothesis_profile="ci", runners=(), project_dir=tmp_path).git_commit == head


def _record(stats: OutputStats) -> CaseRecord:
    return CaseRecord(
        model="m", model_sha256="0" * 64, case=SweepPoint(), status="fail", outputs=(stats,), lowp_flop_share=0.5
    )


def _report(*records: CaseRecord) -> Report:
    return Report.build(records, created="2026-01-01T00:00:00+00:00", provenance=PROVENANCE)


def test_single_records_round_trip_for_worker_hand_off() -> None:
    for record in sample_report().cases:
        assert record_from_dict(json.loads(json.dumps(record_to_dict(record)))) == record


def test_large_saved_outputs_are_stored_uncompressed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Saved outputs above COMPRESS_MAX_BYTES are stored, not deflated (issue 31: deflating a case's 134 MB of
    fp16-rounded logits took 42 s); smaller ones stay deflated; both read back the same."""
    import zipfile

    monkeypatch.setattr("harness.report.io.COMPRESS_MAX_BYTES", 100)
    small, large = [{"y": np.arange(4, dtype=np.float32)}], [{"y": np.arange(64, dtype=np.float16)}]  # 16, 256 B
    for name, runs, kind in (("small.npz", small, zipfile.ZIP_DEFLATED), ("large.npz", large, zipfile.ZIP_STORED)):
        path = save_outputs(tmp_path, f"outputs/m/{name}", runs)
        with zipfile.ZipFile(path) as archive:
            assert {info.compress_type for info in archive.infolist()} == {kind}
        assert load_outputs(tmp_path, f"outputs/m/{name}")[0]["y"].tolist() == runs[0]["y"].tolist()
