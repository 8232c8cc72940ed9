"""The one home for work on a thread while the caller goes on, its error raised where the caller waits for it:

* a background write (:func:`write_later`, :meth:`PendingWrite.wait`): a case's outputs (a decoder's logits:
  131 MB, 0.15-0.4 s to write) are written while its judge runs;
* a background answer (:func:`answer_later`, :meth:`PendingAnswer.result`): a question asked in a child process
  (is onnxruntime's CUDA provider usable here: 1-2 s) while the run plans, reads its goldens and converts.

Stdlib only."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class PendingWrite:
    """A write under way; :meth:`wait` returns once it is done, or raises its error (once: later waits return)."""

    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)

    def wait(self) -> None:
        self.thread.join()
        if self.errors:
            raise self.errors.pop()


def write_later(write: Callable[[], object], *, name: str) -> PendingWrite:
    """Start ``write()`` on its own thread (not a daemon: the interpreter finishes it before exiting)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as err:  # noqa: BLE001 - handed to the thread that waits
            errors.append(err)

    thread = threading.Thread(target=run, name=f"castguard-write-{name}", daemon=False)
    thread.start()
    return PendingWrite(thread=thread, errors=errors)


@dataclass(frozen=True)
class PendingAnswer(Generic[T]):
    """An answer under way; :meth:`result` waits for it and returns it, or raises its error (every time)."""

    thread: threading.Thread
    box: dict[str, object]

    def result(self) -> T:
        self.thread.join()
        if "error" in self.box:
            raise self.box["error"]  # type: ignore[misc]
        return self.box["value"]  # type: ignore[return-value]


def answer_later(ask: Callable[[], T], *, name: str) -> PendingAnswer[T]:
    """Start ``ask()`` on its own daemon thread (nobody needs its answer once the interpreter exits)."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = ask()
        except BaseException as err:  # noqa: BLE001 - handed to the thread that asks for the result
            box["error"] = err

    thread = threading.Thread(target=run, name=f"castguard-ask-{name}", daemon=True)
    thread.start()
    return PendingAnswer(thread=thread, box=box)
