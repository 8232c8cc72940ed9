"""A finished run's report is drawn once and written twice (its run folder, the published copy): same pages."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.report.io as report_io
from harness.report import CaseRecord, Provenance, read_report
from harness.report.collect import ReportSession
from harness.sweep import SweepPoint

PROV = Provenance(castguard="0", onnx="0", onnxruntime="0", numpy="0", python="3", platform="p", hostname="h")


def test_the_run_copy_and_the_published_copy_share_one_rendering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[int] = []
    real = report_io.render_html

    def counting(*args: object, **kwargs: object) -> str:
        drawn.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(report_io, "render_html", counting)
    session = ReportSession(report_dir=tmp_path)
    session.start()
    session.add(
        CaseRecord(
            model="m",
            model_sha256="ab" * 32,
            case=SweepPoint(),
            status="pass",
            runner="emulate",
            inputs_id="seed0-it1-x",
            lowp_flop_share=0.5,
            cast_count=2,
            outputs_file="outputs/a.npz",
        )
    )
    report = session.build(provenance=PROV)
    assert report is not None
    finished = session.write(report)
    assert finished.published is not None and len(drawn) == 1
    run, top = finished.run_paths, finished.published
    assert run.html.read_bytes() == top.html.read_bytes() and run.markdown.read_bytes() == top.markdown.read_bytes()
    # the JSON copies differ only in the saved-output paths (the pages do not show them)
    assert read_report(top.json).cases[0].outputs_file == f"runs/{report.run_id}/outputs/a.npz"
    assert read_report(run.json).cases[0].outputs_file == "outputs/a.npz"
