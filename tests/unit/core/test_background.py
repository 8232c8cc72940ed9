"""core/background: work on a thread, its error raised where the caller waits."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from harness.core.background import answer_later, write_later


def test_a_background_write_is_done_when_waited_for(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    pending = write_later(lambda: target.write_text("done"), name="t")
    pending.wait()
    assert target.read_text() == "done"


def test_a_background_write_s_error_is_raised_once_where_it_is_waited_for() -> None:
    def fail() -> None:
        raise OSError(28, "No space left on device")

    pending = write_later(fail, name="t")
    with pytest.raises(OSError, match="No space left"):
        pending.wait()
    pending.wait()  # said once


def test_a_background_answer_runs_on_another_thread_and_is_kept() -> None:
    release = threading.Event()
    threads: list[str] = []

    def ask() -> int:
        threads.append(threading.current_thread().name)
        release.wait(5)
        return 42

    pending = answer_later(ask, name="q")
    assert pending.thread.is_alive()  # the caller went on while it runs
    release.set()
    assert pending.result() == 42 and pending.result() == 42
    assert threads == ["castguard-ask-q"]


def test_a_background_answer_s_error_is_raised_by_every_result() -> None:
    def ask() -> int:
        raise ValueError("no answer")

    pending = answer_later(ask, name="q")
    for _ in range(2):
        with pytest.raises(ValueError, match="no answer"):
            pending.result()
