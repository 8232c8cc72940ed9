"""core/files: what a writer killed mid-write leaves is removed by the next run, and nothing else is.

The temporary files are made by the real writers (:func:`atomic_write`,
and :func:`atomic_write_files`) in child processes killed with SIGKILL while they write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.files import atomic_write, remove_stale_temps

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

WRITER = """
import sys, time
from pathlib import Path
from harness.core.files import atomic_write, atomic_write_files

folder = Path(sys.argv[1])
def stall(handle):
    handle.write(b"partial")
    handle.flush()
    (folder / "ready").write_text("1")
    time.sleep(60)
which = sys.argv[2]
if which == "one":
    atomic_write(folder / "sub" / "golden.npz", stall)
else:
    def write(paths):
        paths[0].write_bytes(b"weights")
        (folder / "ready").write_text("1")
        time.sleep(60)
    atomic_write_files([folder / "model.onnx.data", folder / "model.onnx"], write)
"""


def _killed_writer(folder: Path, which: str) -> int:
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), which])
    deadline = time.monotonic() + 60
    while not (folder / "ready").exists():
        assert child.poll() is None and time.monotonic() < deadline, "the writer never started writing"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    (folder / "ready").unlink()
    return child.pid


def _hidden_temps(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("which", ["one", "files"])
def test_a_writer_killed_mid_write_leaves_a_temp_that_the_next_run_removes(tmp_path: Path, which: str) -> None:
    _killed_writer(tmp_path, which)
    left = _hidden_temps(tmp_path)
    assert len(left) == 1, left  # the kill left it: nothing can remove a file at SIGKILL
    assert not (tmp_path / "sub" / "golden.npz").exists() and not (tmp_path / "model.onnx").exists()
    assert remove_stale_temps(tmp_path) == 1
    assert _hidden_temps(tmp_path) == []


def test_a_live_writer_s_temp_another_host_s_and_foreign_files_stay(tmp_path: Path) -> None:
    atomic_write(tmp_path / "done.json", b"{}")  # a finished write leaves no temp
    assert _hidden_temps(tmp_path) == []
    mine = tmp_path / f".a.npz.cg-{_host()}-{os.getpid()}.abcd1234.tmp"  # a write in progress: this process
    elsewhere = tmp_path / ".a.npz.cg-otherhost-1.abcd1234.tmp"  # a writer on another machine (shared folder)
    foreign = tmp_path / ".someone-else.tmp"  # not castguard's name
    for path in (mine, elsewhere, foreign):
        path.write_bytes(b"x")
    assert remove_stale_temps(tmp_path) == 0
    assert mine.exists() and elsewhere.exists() and foreign.exists()
    assert remove_stale_temps(tmp_path / "missing") == 0


def _host() -> str:
    import re
    import socket

    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname())
