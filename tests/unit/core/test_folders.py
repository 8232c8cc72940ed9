"""core/folders.check_writable when two runs in one project probe the same missing report folder at once."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

import harness.core.folders as folders
from harness.core.errors import NotWritable
from harness.core.folders import check_writable


def test_a_missing_folder_is_probed_and_removed_again(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "castguard-report"
    check_writable(folder, what="the report folder (--report-dir)")
    assert not (tmp_path / "a").exists()


def test_a_folder_another_run_removes_under_the_probe_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other run made the folder, probed it and removed it between this run's mkdir and its probe file: the
    probe is made again, not a FileNotFoundError."""
    folder = tmp_path / "castguard-report"
    real = tempfile.NamedTemporaryFile
    calls: list[int] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            folder.rmdir()  # the other run's cleanup
        return real(*args, **kwargs)

    monkeypatch.setattr(folders.tempfile, "NamedTemporaryFile", racing)
    check_writable(folder, what="the report folder (--report-dir)")
    assert len(calls) == 2 and not folder.exists()


def test_a_folder_another_run_writes_in_is_left_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This run made the folder, and another run's probe (or report) is in it when this run would remove it: the
    folder stays, and neither run fails."""
    folder = tmp_path / "castguard-report"
    real = tempfile.NamedTemporaryFile

    def racing(*args: Any, **kwargs: Any) -> Any:
        (folder / ".castguard-probe.other.tmp").write_text("")  # the other run's probe, written meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(folders.tempfile, "NamedTemporaryFile", racing)
    check_writable(folder, what="the report folder (--report-dir)")
    assert (folder / ".castguard-probe.other.tmp").exists()


def test_a_folder_that_keeps_vanishing_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "castguard-report"

    def vanished(*args: Any, **kwargs: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(folders.tempfile, "NamedTemporaryFile", vanished)
    with pytest.raises(NotWritable, match="vanished 5 times"):
        check_writable(folder, what="the report folder (--report-dir)")
