"""A full disk (ENOSPC) while writing a golden, a cache entry or the report: one DiskFull error naming the folder
and the fix, nothing half-written (no temporary file, the previous file kept), and the summary still printed.

The fault is injected where every castguard file is written: the temporary file of :func:`harness.core.files.
atomic_write` raises ``OSError(ENOSPC)`` once a few bytes have gone into it, for files under a chosen folder.
"""

from __future__ import annotations

import errno
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.core.files
from harness.core.errors import DiskFull, UserError
from harness.core.files import atomic_write
from harness.data.goldens import Golden, GoldenStore
from harness.data.models import resolve_model
from harness.data.recipes import InputRecipe
from harness.pipeline.cache import CacheSkipped, ContentCache
from harness.report.collect import ReportSession
from tests.helpers.graphs import mlp_model, save
from tests.helpers.report_samples import sample_report

pytest_plugins = ["pytester"]
RECIPE = InputRecipe(seed=1, iterations=1)


class _Full:
    """A file object that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, file: Any, room: int) -> None:
        self._file, self._room = file, room

    def write(self, data: bytes) -> int:
        if len(data) > self._room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= len(data)
        return int(self._file.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def __enter__(self) -> _Full:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


def fill_disk(monkeypatch: pytest.MonkeyPatch, under: Path, *, room: int = 16, named: str = "") -> None:
    """Writes under ``under`` (of files whose name contains ``named``) fail after ``room`` bytes."""
    real = tempfile.NamedTemporaryFile

    def full(*args: Any, **kwargs: Any) -> Any:
        handle = real(*args, **kwargs)
        if Path(kwargs["dir"]).resolve().is_relative_to(under.resolve()) and named in kwargs["prefix"]:
            handle.file = _Full(handle.file, room)
        return handle

    monkeypatch.setattr(harness.core.files.tempfile, "NamedTemporaryFile", full)


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp") or p.suffix == ".lock"]


def test_atomic_write_keeps_the_old_file_and_says_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out" / "a.json"
    atomic_write(path, b"old content")
    fill_disk(monkeypatch, tmp_path / "out")
    with pytest.raises(DiskFull) as err:
        atomic_write(path, b"x" * 1000)
    assert isinstance(err.value, UserError) and err.value.folder == tmp_path / "out"
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'out'}: no space left on the device while writing a.json")
    assert "fix: free space, or point castguard at a folder on another disk (--goldens-dir, --cache-dir" in text
    assert path.read_bytes() == b"old content" and leftovers(tmp_path) == []


def test_other_write_errors_are_not_called_a_full_disk(tmp_path: Path) -> None:
    def broken(handle: Any) -> None:
        raise OSError(errno.EIO, "I/O error")

    with pytest.raises(OSError) as err:
        atomic_write(tmp_path / "b.bin", broken)
    assert not isinstance(err.value, DiskFull) and err.value.errno == errno.EIO and leftovers(tmp_path) == []


def test_a_golden_on_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve_model(str(save(mlp_model(), tmp_path / "models" / "mlp.onnx")), search_dir=tmp_path)
    golden = Golden(
        feeds=[{"x": np.ones((1, 8), np.float32)}],
        outputs=[{"y": np.ones((1, 4), np.float32)}],
        meta={"producer": "ort[CPUExecutionProvider]"},
    )
    fill_disk(monkeypatch, tmp_path / "goldens")
    with pytest.raises(DiskFull, match="no space left on the device while writing") as err:
        GoldenStore(tmp_path / "goldens").write(spec, RECIPE, golden)
    assert err.value.folder == tmp_path / "goldens" / "mlp"
    assert sorted(p.name for p in (tmp_path / "goldens" / "mlp").iterdir()) == []  # no npz, tmp or lock


def test_a_cache_entry_on_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is optional: a full cache disk is one warning naming the folder, and the work is handed out."""
    fill_disk(monkeypatch, tmp_path / "cache")
    cache = ContentCache(tmp_path / "cache")
    with pytest.warns(CacheSkipped, match="no space left on the device while writing") as said:
        entry, hit = cache.json_entry("trt-build", "k", lambda: {"big": "x" * 1000})
        again, _ = cache.json_entry("trt-build", "k2", lambda: {"big": "y" * 1000})
    assert entry == {"big": "x" * 1000} and not hit and again == {"big": "y" * 1000}
    assert len(said) == 1 and str(tmp_path / "cache") in str(said[0].message)  # the first write refused (.gitignore)
    entries = tmp_path / "cache" / "trt-build"
    assert not entries.exists() or [p.name for p in entries.iterdir() if p.suffix != ".lock"] == []


def test_a_report_on_a_full_disk_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report_dir = tmp_path / "report"
    (report_dir).mkdir()
    for name in ("report.json", "report.md", "report.html"):
        (report_dir / name).write_text(f"previous {name}")
    session = ReportSession(report_dir=report_dir)
    session.start()
    report = replace(sample_report(), run_id=session.run_id)
    fill_disk(monkeypatch, report_dir, room=4096)  # a smaller file fits, a larger one does not: none may change
    finished = session.write(report)
    assert isinstance(finished.error, DiskFull) and finished.published is None
    line = finished.summary_line()
    assert "the report was not written" in line and "no space left on the device" in line and "fix: free" in line
    assert (report_dir / "report.json").read_text() == "previous report.json"
    for name in ("report.md", "report.html"):  # whole: unchanged, or marked as not the latest run (issue 33.3)
        text = (report_dir / name).read_text()
        assert text == f"previous {name}" or (text.endswith(f"previous {name}") and "Not the latest run" in text)
    assert "report.md, report.html marked as not the latest run" in line  # 4 kB is room for both banners
    assert not session.run_dir.exists()  # the failed run's half-written folder is gone
    assert [p for p in report_dir.rglob("*") if p.name.endswith(".tmp")] == []


def test_the_plugin_prints_its_summary_and_fails_when_the_report_cannot_be_written(pytester: pytest.Pytester) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    args = (
        "-p",
        "no:cacheprovider",
        "--model",
        "models/mlp.onnx",
        "--precision",
        "fp16",
        "--data-max",
        "512",
        "--exclude-ops",
        "none",
        "--keep-io-types",
        "false",
    )
    pytester.runpytest(*args).assert_outcomes(passed=1, failed=1)  # the golden is written
    with pytest.MonkeyPatch.context() as patch:
        fill_disk(patch, pytester.path / "castguard-report")
        result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=1)  # the case's saved outputs go to the report folder too
    assert result.ret != 0
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    result.stdout.fnmatch_lines(
        [
            "*no space left on the device while writing fp16-*.npz*",  # the case's outputs (the golden's are a link)
            "*castguard sweep report*",
            "castguard: 1 case: 1 error; the report was not written: "
            "*castguard-report/runs/*: no space left on the device while writing report.*",
            "*fix: free space*",
        ]
    )
    first_report = (pytester.path / "castguard-report" / "report.json").read_text()

    with pytest.MonkeyPatch.context() as patch:
        fill_disk(patch, pytester.path / "castguard-report", named=".report.")  # only the report's own files
        result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # every test passed, but there is no report
    assert "INTERNALERROR" not in result.stdout.str() and "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "castguard: 1 case: 1 pass; the report was not written: *castguard-report/runs/*: "
            "no space left on the device while writing report.json*",
            "*fix: free space*",
        ]
    )
    assert (pytester.path / "castguard-report" / "report.json").read_text() == first_report
    assert json.loads(first_report)["summary"]["pass"] == 1


def test_a_golden_npz_is_never_left_without_its_sidecar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33 item 14: only the sidecar's write fails; the .npz must not stay behind on its own."""
    spec = resolve_model(str(save(mlp_model(), tmp_path / "models" / "mlp.onnx")), search_dir=tmp_path)
    golden = Golden(
        feeds=[{"x": np.ones((1, 8), np.float32)}],
        outputs=[{"y": np.ones((1, 4), np.float32)}],
        meta={"producer": "ort[CPUExecutionProvider]"},
    )
    fill_disk(monkeypatch, tmp_path / "goldens", room=64, named=".json")
    with pytest.raises(DiskFull, match="nothing was written"):
        GoldenStore(tmp_path / "goldens").write(spec, RECIPE, golden)
    assert sorted(p.name for p in (tmp_path / "goldens" / "mlp").iterdir()) == []


@pytest.mark.parametrize("fails", ["tuned.onnx", "tuned.plan.json"])
def test_tune_writes_its_model_and_plan_both_or_neither(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """Issue 33 item 14: a full disk while the tuned model is saved leaves no plan that says it was written."""
    import onnx

    from harness.cli import main
    from test_models import tune_models

    onnx.save(tune_models.residual_cancel(), tmp_path / "m.onnx")
    fill_disk(monkeypatch, tmp_path / "out", named=fails)
    args = ["tune", "--onnx_path", str(tmp_path / "m.onnx"), "--output_path", str(tmp_path / "out" / "tuned.onnx")]
    code = main([*args, "--quiet", "--adversarial_examples", "0", "--no_cache"])
    assert code == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []  # neither the model nor tuned.plan.json
