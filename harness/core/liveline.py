"""A live line while a long step of a case runs: "castguard: <case>: <step> ... 12 s", first after ``after_s``,
then every ``every_s``, until the step ends. A step that ends sooner says nothing, so fast cases stay silent.

A step whose cost is not bounded by one forward says first what it will cost, when its estimate crosses
``announce_s`` or ``announce_bytes`` (:meth:`LiveLine.announce`; the estimates: :mod:`harness.pipeline.estimate`).

The line goes to ``write`` (the pytest plugin passes one that writes past output capture, and none under ``-q``);
a daemon thread waits on an event, so the step itself is never slowed or interrupted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class LiveLine:
    write: Callable[[str], None]
    after_s: float = 5.0
    every_s: float = 10.0
    announce_s: float = 60.0
    announce_bytes: int = 1_000_000_000

    def announce(self, label: str, *, seconds: float, peak_bytes: int, text: str) -> bool:
        """Say ``text`` before a step starts when its estimate crosses a threshold; whether it was said."""
        if seconds < self.announce_s and peak_bytes < self.announce_bytes:
            return False
        self.write(f"castguard: {label}: {text}")
        return True

    @contextmanager
    def step(self, label: str, step: str) -> Iterator[None]:
        """Around one step: the line appears only if the step is still running after ``after_s``."""
        done = threading.Event()
        start = time.monotonic()

        def beat() -> None:
            wait = self.after_s
            while not done.wait(wait):
                self.write(f"castguard: {label}: {step} ... {time.monotonic() - start:.0f} s")
                wait = self.every_s

        thread = threading.Thread(target=beat, name="castguard-live-line", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
