"""Recheck: re-judge a report folder's saved outputs with new tolerances, no conversion and no inference.

The report folder is made for real: the bundled ``needs_constraints`` model converted twice (the default
conversion, which keeps the overflowing Add/Sub in FP32, and Add forced to fp16), run on ``emulate`` and
compared with its ORT FP32 golden, exactly as a sweep would.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.convert import collect_magnitudes, convert
from harness.core.errors import UserError
from harness.data.feeds import cast_feeds, input_specs
from harness.data.models import bundled_models_dir, resolve_model
from harness.data.onnxfile import load_model
from harness.data.recipes import InputRecipe, make_feeds
from harness.judge.compare import Tolerance, compare_iterations
from harness.judge.tolerances import TolerancePolicy
from harness.nightly.recheck import RecheckedCase, ToleranceOverride, parse_per_output, recheck
from harness.report import CaseRecord, Report, golden_relpath, output_stats, outputs_relpath, save_outputs, write_report
from harness.runners import make_runner
from harness.sweep import SweepPoint
from tests.helpers.report_samples import PROVENANCE

DEFAULT = SweepPoint(precision="fp16", data_max=512.0)
FORCED = SweepPoint(precision="fp16", data_max=512.0, node_precisions=(("Add", "fp16"), ("Sub", "fp32")))


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real two-case report folder (pass + expected failure) with saved outputs and golden."""
    folder = tmp_path_factory.mktemp("report")
    spec = resolve_model("needs_constraints", search_dir=bundled_models_dir())
    model = load_model(spec.path)
    recipe = InputRecipe(val_ranges=(("x", 1.0, 2.0),), iterations=3)
    feeds = make_feeds(model, recipe, where="test")
    golden = make_runner("ort", model).run(feeds).outputs
    save_outputs(folder, golden_relpath(spec.name, recipe.id), golden)
    magnitudes = collect_magnitudes(model, feeds=feeds)
    records = []
    for case, expected_failure in ((DEFAULT, False), (FORCED, True)):
        converted = convert(model, options=case.convert_options(), magnitudes=magnitudes).model
        outputs = make_runner("emulate", converted).run(cast_feeds(feeds, input_specs(converted))).outputs
        tolerances = TolerancePolicy().tolerances_for(precision="fp16", goldens=golden)
        comparison = compare_iterations(outputs, golden, tolerances=tolerances, default=Tolerance())
        relpath = save_outputs(folder, outputs_relpath(spec.name, recipe.id, case.id), outputs).relative_to(folder)
        status = ("xpass" if comparison else "xfail") if expected_failure else ("pass" if comparison else "fail")
        records.append(
            CaseRecord(
                model=spec.name,
                model_sha256=spec.sha256,
                case=case,
                status=status,
                runner="emulate",
                rounds_low_precision=True,
                inputs_id=recipe.id,
                outputs=output_stats(comparison, golden),
                outputs_file=str(relpath),
                golden_file=golden_relpath(spec.name, recipe.id),
            )
        )
    records.append(
        CaseRecord(
            model=spec.name,
            model_sha256=spec.sha256,
            case=SweepPoint(precision="bf16"),
            status="error",
            runner="emulate",
            inputs_id=recipe.id,
            message="could not run",
        )
    )
    write_report(Report.build(records, created="2026-11-20T10:00:00+00:00", provenance=PROVENANCE), folder)
    return folder


def _statuses(folder: Path, override: ToleranceOverride) -> dict[str, str]:
    return {c.record.case_id: c.status for c in recheck(folder, override=override).cases}


def test_recorded_tolerances_reproduce_the_recorded_verdicts(report_dir: Path) -> None:
    result = recheck(report_dir, override=ToleranceOverride())
    assert {c.record.case_id: (c.record.status, c.status) for c in result.cases} == {
        DEFAULT.id: ("pass", "pass"),
        FORCED.id: ("xfail", "xfail"),
        SweepPoint(precision="bf16").id: ("error", "error"),
    }
    assert result.rechecked == 2 and result.exit_code == 0
    assert not any(c.changed for c in result.cases)
    assert "no saved outputs" in next(c.reason for c in result.cases if c.record.status == "error")


def test_a_loose_tolerance_flips_the_expected_failure_and_a_tight_one_fails_the_pass(report_dir: Path) -> None:
    loose = ToleranceOverride(atol=(("", 1e6),))
    assert _statuses(report_dir, loose)[FORCED.id] == "xpass"
    assert recheck(report_dir, override=loose).exit_code == 1  # a strict expected failure that passes
    tight = ToleranceOverride(atol=(("", 1e-3),))  # the fp16 run's error is ~3.9e-3 (one fp16 step at 2)
    result = recheck(report_dir, override=tight)
    assert {c.record.case_id: c.status for c in result.cases if c.changed} == {DEFAULT.id: "fail"}
    assert result.exit_code == 1
    median = ToleranceOverride(atol=(("", 1e-3),), mode=(("", "median"),))
    assert _statuses(report_dir, median)[DEFAULT.id] == "pass"  # few elements move: the median forgives them


def test_every_error_statistic_mode_is_available(report_dir: Path) -> None:
    for mode in ("elemwise", "max", "mean", "median", "quantile", "isclose"):
        result = recheck(report_dir, override=ToleranceOverride(mode=(("", mode),)))
        forced = next(c for c in result.cases if c.record.case_id == FORCED.id)
        assert forced.comparison is not None and forced.comparison.outputs[0].tolerance.mode == mode


def test_per_output_values_beat_the_default_and_unknown_outputs_are_refused(report_dir: Path) -> None:
    override = ToleranceOverride(atol=(("", 0.0), ("y", 1e6)))
    assert override.apply("y", Tolerance(atol=1.0)).atol == 1e6
    assert override.apply("z", Tolerance(atol=1.0)).atol == 0.0
    with pytest.raises(UserError, match=r"no case .* has output\(s\) \['logits'\]"):
        recheck(report_dir, override=ToleranceOverride(atol=(("logits", 1.0),)))
    with pytest.raises(UserError, match="given twice"):
        ToleranceOverride(rtol=(("y", 1.0), ("y", 2.0)))


def test_parse_per_output_is_polygraphy_syntax() -> None:
    assert parse_per_output(["1e-3", "out:0:5e-2"], float, where="--atol") == (("", 1e-3), ("out:0", 5e-2))
    with pytest.raises(UserError, match="--atol 'y:abc'"):
        parse_per_output(["y:abc"], float, where="--atol")


def test_outputs_that_do_not_belong_to_the_report_are_an_error(report_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(report_dir, copy)
    forced = next(p for p in (copy / "outputs").rglob("*.npz") if "np_Add" in p.name)
    arrays = dict(np.load(forced, allow_pickle=False))
    np.savez(forced, **{key: value + 1.0 for key, value in arrays.items()})
    result = recheck(copy, override=ToleranceOverride())
    broken = next(c for c in result.cases if c.record.case_id == FORCED.id)
    assert broken.broken and broken.status == "error" and "do not reproduce the recorded statistics" in broken.reason
    assert result.exit_code == 1


def test_paths_outside_the_report_folder_are_refused(report_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(report_dir, copy)
    data = json.loads((copy / "report.json").read_text())
    index = next(i for i, case in enumerate(data["cases"]) if case["outputs_file"])
    data["cases"][index]["outputs_file"] = "../../etc/passwd.npz"
    (copy / "report.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="leaves the report folder"):
        recheck(copy, override=ToleranceOverride())


def test_cli_recheck_prints_changed_cases_and_exits_like_pytest(
    report_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["recheck", str(report_dir)]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 case(s) rechecked" in out and "0 changed" in out
    assert main(["recheck", str(report_dir), "--atol", "1e6", "--check-error-stat", "median"]) == 1
    out = capsys.readouterr().out
    assert f"{FORCED.id}" in out and "xfail -> xpass" in out
    assert main(["recheck", str(report_dir), "--check-error-stat", "mode"]) == 2
    assert "--check-error-stat 'mode'" in capsys.readouterr().err


def test_a_missing_report_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recheck", str(tmp_path)]) == 2
    assert "report not found" in capsys.readouterr().err


def test_changed_flag() -> None:
    record = CaseRecord(model="m", model_sha256="0" * 64, case=DEFAULT, status="pass")
    assert RecheckedCase(record=record, status="fail").changed
    assert not RecheckedCase(record=dataclasses.replace(record, status="fail"), status="fail").changed
