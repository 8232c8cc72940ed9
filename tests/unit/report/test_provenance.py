"""Golden provenance drift: notes on every affected case, an error under --strict-provenance."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.core.errors import GoldenError
from harness.data.drift import GoldenProvenanceError, check_golden_provenance, drift_notes, installed_versions
from harness.report import Report
from harness.report.render_html import render_html
from harness.report.render_md import render_markdown
from harness.report.view import report_view
from harness.sweep import SweepSpec, expand
from tests.helpers.report_samples import PROVENANCE, record_for

GOLDEN = Path(__file__).resolve().parents[3] / "goldens" / "mnist" / "file-7da33369.json"
CURRENT = {"onnx": "1.23.2", "onnxruntime": "1.31.1"}


def test_same_versions_drift_nothing() -> None:
    meta = {"versions": {"onnx": "1.23.2", "onnxruntime": "1.31.1", "numpy": "1.0"}}  # numpy does not count
    assert drift_notes(meta, current=CURRENT) == ()


def test_each_drifted_package_gets_a_note() -> None:
    meta = {"versions": {"onnx": "1.17.0", "onnxruntime": "1.20.1"}}
    assert drift_notes(meta, current=CURRENT) == (
        "golden made with onnx 1.17.0, this run uses 1.23.2",
        "golden made with onnxruntime 1.20.1, this run uses 1.31.1",
    )
    assert drift_notes({}, current=CURRENT)[1] == "golden made with onnxruntime unrecorded, this run uses 1.31.1"


def test_strict_provenance_makes_drift_a_golden_error_naming_the_file_and_fix() -> None:
    meta = {"model": "mnist", "versions": {"onnx": "1.23.2", "onnxruntime": "1.20.1"}}
    assert check_golden_provenance(meta, current=CURRENT, strict=False, golden="g.npz") == (
        "golden made with onnxruntime 1.20.1, this run uses 1.31.1",
    )
    with pytest.raises(GoldenProvenanceError) as caught:
        check_golden_provenance(meta, current=CURRENT, strict=True, golden="goldens/mnist/x.npz")
    assert isinstance(caught.value, GoldenError)
    text = str(caught.value)
    assert text.startswith("goldens/mnist/x.npz: golden made with onnxruntime 1.20.1, this run uses 1.31.1")
    assert "pytest --model mnist --update-goldens" in text and "--strict-provenance" in text


def test_the_committed_golden_sidecar_is_read_as_recorded() -> None:
    meta = json.loads(GOLDEN.read_text())
    assert (
        drift_notes(meta, current={"onnx": meta["versions"]["onnx"], "onnxruntime": meta["versions"]["onnxruntime"]})
        == ()
    )
    assert len(drift_notes(meta, current={"onnx": "0.0", "onnxruntime": "0.0"})) == 2


def test_installed_versions_are_read_like_the_golden_sidecar_records_them() -> None:
    import onnx
    import onnxruntime

    assert installed_versions() == {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def test_the_report_names_every_affected_case() -> None:
    note = "golden made with onnxruntime 1.20.1, this run uses 1.31.1"
    cases = [record_for(case) for case in expand(SweepSpec(keep_io_types=(False, True)))]
    noted = [dataclasses.replace(c, notes=(note,)) if c.case.precision == "fp16" else c for c in cases]
    report = Report.build(noted, created="2026-11-20T10:00:00+00:00", provenance=PROVENANCE)
    fp16 = [c.case_id for c in cases if c.case.precision == "fp16"]
    markdown = render_markdown(report_view(report))
    line = next(line for line in markdown.splitlines() if line.startswith(f"- {note}"))
    assert f"({len(fp16)} case(s): " in line and all(f"`{i}`" in line for i in fp16)
    assert "bf16-" not in line
    html = render_html(report_view(report))
    assert "<h3>Notes</h3>" in html and all(f'<code class="id">{i}</code>' in html for i in fp16)


def test_a_note_on_every_case_is_not_listed_case_by_case() -> None:
    note = "golden made with onnx 1.17.0, this run uses 1.23.2"
    cases = [
        dataclasses.replace(record_for(case), notes=(note,)) for case in expand(SweepSpec(keep_io_types=(False, True)))
    ]
    report = Report.build(cases, created="2026-11-20T10:00:00+00:00", provenance=PROVENANCE)
    assert f"- {note} (every case)" in render_markdown(report_view(report))
    assert f"<li>{note} (every case)</li>" in render_html(report_view(report))
