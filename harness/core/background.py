"""The one background write: a file written by a thread while the caller goes on, its error raised where the
caller waits for it (:meth:`PendingWrite.wait`). A case's outputs (a decoder's logits: 131 MB, 0.15-0.4 s to
write) are written while its diagnosis starts. Stdlib only."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field


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
