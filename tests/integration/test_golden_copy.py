"""The golden's copy in the report folder is a hard link to the golden's own file, not a second write of it (a
decoder's logits), reads back as the golden's outputs, and keeps this run's golden when the golden is rewritten;
where no link can be made, or an output is fp16, the outputs are written as before."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import onnx
import pytest

import harness.core.files
from harness.report import load_outputs, save_golden_copy
from tests.conftest import Run
from tests.helpers.graphs import mlp_model

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:cacheprovider", "--model", "models/mlp.onnx", "--precision", "fp16", "--data-max", "512")


def _golden_copies(report: Path) -> list[Path]:
    return sorted(report.glob("runs/*/outputs/*/*/golden.npz"))  # run folders are named by their start time


def test_the_report_links_the_golden_and_keeps_its_run_s_golden(pytester: pytest.Pytester, castguard_in: Run) -> None:
    (pytester.path / "models").mkdir()
    onnx.save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    castguard_in(pytester, *ARGS)  # writes the golden
    castguard_in(pytester, *ARGS).assert_outcomes(passed=3)
    (golden_file,) = (pytester.path / "goldens").glob("*/*.npz")
    copy = _golden_copies(pytester.path / "castguard-report")[-1]
    assert copy.stat().st_ino == golden_file.stat().st_ino  # one file, two names
    with np.load(golden_file) as archive:
        expected = {k.removeprefix("output/0/"): archive[k] for k in archive.files if k.startswith("output/")}
    (read,) = load_outputs(copy.parents[3], str(copy.relative_to(copy.parents[3])))
    assert read.keys() == expected.keys() and all(np.array_equal(read[k], expected[k]) for k in expected)
    onnx.save(mlp_model(seed=1), pytester.path / "models" / "mlp.onnx")  # a new version: its golden is rewritten
    castguard_in(pytester, *ARGS, "--update-goldens")
    assert golden_file.stat().st_ino != copy.stat().st_ino  # the goldens folder made a new file
    (again,) = load_outputs(copy.parents[3], str(copy.relative_to(copy.parents[3])))
    assert all(np.array_equal(again[k], expected[k]) for k in expected)  # the earlier run's golden, as it was


def test_a_golden_copy_is_written_where_no_link_can_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    golden_file = tmp_path / "goldens" / "g.npz"
    golden_file.parent.mkdir()
    outputs = [{"y": np.arange(6, dtype=np.float32).reshape(2, 3)}]
    np.savez(golden_file, **{"input/0/x": np.ones(2, np.float32), "output/0/y": outputs[0]["y"]})
    report = tmp_path / "report"
    linked = save_golden_copy(report, "outputs/a/golden.npz", golden_file=golden_file, iterations=outputs)
    assert linked.stat().st_ino == golden_file.stat().st_ino
    half = [{"y": outputs[0]["y"].astype(np.float16)}]  # the golden's file keeps fp16; saved outputs are float32
    written = save_golden_copy(report, "outputs/b/golden.npz", golden_file=golden_file, iterations=half)
    assert written.stat().st_ino != golden_file.stat().st_ino
    assert load_outputs(report, "outputs/b/golden.npz")[0]["y"].dtype == np.float32

    def cross_device(source: object, target: object) -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(harness.core.files.os, "link", cross_device)
    copied = save_golden_copy(report, "outputs/c/golden.npz", golden_file=golden_file, iterations=outputs)
    assert copied.stat().st_ino != golden_file.stat().st_ino
    assert np.array_equal(load_outputs(report, "outputs/c/golden.npz")[0]["y"], outputs[0]["y"])
    assert not [p for p in report.rglob("*") if p.name.endswith(".tmp")]
