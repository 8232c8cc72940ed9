"""Faults at session end end in a true report (issues 33.3, 33.4): a full or read-only ``--history`` folder, a
report folder that fills up during the run, and ``castguard merge --out`` on a full disk.

The small disks are real tmpfs mounts (``mount -t tmpfs -o size=...``; skipped with the reason where this machine
does not allow mounting); the projects run real ``pytest --model`` processes from a folder with a space.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.helpers.graphs import mlp_model, save

ONE_CASE = ["--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false"]
SUITE_ARGS = ("--model", "m.onnx", *ONE_CASE)  # the options of every pytest run here
Mount = Callable[..., Path]


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Mount]:
    """``disk(kb=..., read_only=False)``: a fresh tmpfs of that size, unmounted afterwards."""
    mounted: list[Path] = []

    def mount(*, kb: int = 1024, read_only: bool = False) -> Path:
        point = tmp_path / f"disk {len(mounted)}"
        point.mkdir()
        options = f"size={kb}k" + (",ro" if read_only else "")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            pytest.skip(f"this machine does not allow mounting a tmpfs: {done.stderr.strip() or done.returncode}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def fill(folder: Path, *, leave_kb: int) -> None:
    """Fill the tmpfs holding ``folder`` until ``leave_kb`` remain."""
    import shutil

    free = shutil.disk_usage(folder).free
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave_kb * 1024))


@pytest.fixture
def project(tmp_path: Path, castguard_in: Run) -> Path:
    folder = tmp_path / "my project"
    save(mlp_model(), folder / "m.onnx")
    (folder / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n[tool.castguard]\n')
    assert castguard_in(folder, *SUITE_ARGS, timeout=300).proc.returncode == 1  # the golden, written once
    return folder


def no_leftovers(folder: Path) -> None:
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "filler"]
    assert not [p for p in files if p.name.endswith(".tmp")], files
    assert not [p for p in files if p.suffix in (".npz", ".json") and p.stat().st_size == 0], files


@pytest.mark.parametrize("how", ["full", "read-only"])
def test_a_history_folder_that_cannot_take_the_run(project: Path, disk: Mount, how: str, castguard_in: Run) -> None:
    point = disk(kb=64, read_only=how == "read-only")
    if how == "full":
        (point / "hist").mkdir()
        fill(point, leave_kb=0)
    history = point / "hist"
    done = castguard_in(project, *SUITE_ARGS, "--history", str(history), timeout=300).proc
    out = done.stdout + done.stderr
    if how == "read-only":  # known before anything runs: one usage error naming the folder, nothing run
        assert done.returncode == 4, out[-3000:]
        assert "Traceback" not in out and "INTERNALERROR" not in out
        assert str(point) in out and "read-only" in out.lower()
        return
    assert done.returncode == 1, out[-3000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert out.count(f"history: this run was NOT stored: {history}") == 1
    report = json.loads((project / "castguard-report" / "report.json").read_text())
    assert [c["status"] for c in report["cases"]] == ["pass"]
    assert "this run was NOT stored" in (project / "castguard-report" / "report.md").read_text()
    if how == "full":
        no_leftovers(point)
        assert [p.name for p in history.iterdir()] == []


def test_a_report_folder_that_fills_up_marks_the_previous_report_stale(
    project: Path, disk: Mount, castguard_in: Run
) -> None:
    point = disk(kb=1024)
    reports = point / "reports"
    assert castguard_in(project, *SUITE_ARGS, "--report-dir", str(reports), timeout=300).proc.returncode == 0
    first = json.loads((reports / "report.json").read_text())["run_id"]
    fill(point, leave_kb=16)
    done = castguard_in(project, *SUITE_ARGS, "--report-dir", str(reports), timeout=300).proc
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert "the report was not written" in out and "no space left" in out
    assert f"the previous report in {reports} is an older run's" in out
    assert json.loads((reports / "report.json").read_text())["run_id"] == first  # whole, and the older run's
    assert "Not the latest run" in (reports / "report.md").read_text()
    assert [p.name for p in (reports / "runs").iterdir()] == [first]  # the failed run's folder is gone
    no_leftovers(point)


def test_merge_out_on_a_full_disk_is_one_error_and_leaves_no_empty_npz(
    tmp_path: Path, project: Path, disk: Mount, castguard_in: Run
) -> None:
    for k in (1, 2):
        shard = ("--shard", f"{k}/2", "--report-dir", f"shard {k}", "--precision", "fp16,bf16")
        castguard_in(project, *SUITE_ARGS, *shard, timeout=300)
    point = disk(kb=64)
    fill(point, leave_kb=4)
    out_dir = point / "merged"
    merge = ("merge", "shard 1", "shard 2", "--out", str(out_dir))
    done = castguard_in(project, *merge, tool="castguard", timeout=300).proc
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    assert "Traceback" not in out and "shutil.Error" not in out
    assert "no space left on the device" in out and str(out_dir) in out
    no_leftovers(point)
    assert not list((out_dir / "runs").glob("*")) if (out_dir / "runs").exists() else True
