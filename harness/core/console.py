"""What the ``castguard`` commands print, at which verbosity, and in which colour (stdlib only).

Every line a command prints is one of four kinds (:class:`Console`):

* an **error** (stderr): always printed;
* a **result**: the command's verdict or answer (``mnist: pass``, the tune summary, a listing); hidden by ``-qq``;
* an **info** line: progress and hints (``review it and commit it``, tune's evaluations); hidden by ``-q``;
* a **detail** line: printed only with ``-v``.

``-q``/``-v`` count (``-qq``, ``-vv``) and may be given before or after the subcommand (``castguard -q tune ...``
and ``castguard tune -q ...`` add up: :func:`split_leading`). ``--color yes|no|auto`` mirrors pytest's: ``auto``
colours only a terminal, never with ``NO_COLOR`` set (``PY_COLORS``/``FORCE_COLOR`` as pytest reads them).

The status words of a case (``pass``, ``fail``, ``xfail``, ``xpass``, ``skip``, ``error``) are coloured as pytest
colours its own outcomes; :func:`status_spans` says where they are in a line (as a count ``3 fail``, after an arrow
``pass -> fail``, or ending a line ``mnist: pass``), so that the CLI (ANSI codes) and the pytest plugin (the
terminal reporter's markup, which honours ``--color`` and ``NO_COLOR``) colour the same words.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

ERRORS_ONLY = -2
QUIET = -1

# the colour pytest gives each outcome (its terminal reporter: passed green, failed/error red, the rest yellow)
STATUS_COLOURS = {
    "pass": "green",
    "fail": "red",
    "error": "red",
    "xfail": "yellow",
    "xpass": "yellow",
    "skip": "yellow",
}
_ANSI = {"green": "\x1b[32m", "red": "\x1b[31m", "yellow": "\x1b[33m"}
_RESET = "\x1b[0m"
_WORDS = "|".join(sorted(STATUS_COLOURS, key=len, reverse=True))
_STATUS = re.compile(rf"(?:(?<=\d )|(?<=-> )|(?<=: ))({_WORDS})\b(?=[,;)\s]|$)")
_GLOBAL = re.compile(r"^(-[qv]+|--quiet|--verbose|--color(=.*)?)$")


def status_spans(line: str) -> list[tuple[str, str | None]]:
    """``line`` cut into ``(text, colour)`` pieces: each status word (see the module docstring) with its colour,
    the rest with None. Joined, the pieces are ``line``."""
    spans: list[tuple[str, str | None]] = []
    at = 0
    for found in _STATUS.finditer(line):
        if found.start() > at:
            spans.append((line[at : found.start()], None))
        spans.append((found.group(1), STATUS_COLOURS[found.group(1)]))
        at = found.end()
    if at < len(line) or not spans:
        spans.append((line[at:], None))
    return spans


def wants_colour(choice: str, stream: TextIO) -> bool:
    """``--color yes|no|auto`` for ``stream``, decided as pytest decides its own (``auto``: a terminal, unless
    ``NO_COLOR`` is set; ``PY_COLORS=1|0`` and ``FORCE_COLOR`` override as they do in pytest)."""
    if choice in ("yes", "no"):
        return choice == "yes"
    if os.environ.get("PY_COLORS") in ("0", "1"):
        return os.environ["PY_COLORS"] == "1"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def add_console_options(parser: argparse.ArgumentParser) -> None:
    """``-q``/``--quiet``, ``-v``/``--verbose`` (both count) and ``--color`` on ``parser``."""
    parser.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=0,
        help="print less: -q hides progress and hints (results and errors stay), -qq prints errors only",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="print more detail where there is any")
    parser.add_argument(
        "--color",
        choices=("yes", "no", "auto"),
        default="auto",
        help="colour the status words (pass, fail, error...): auto (default) on a terminal unless NO_COLOR is set",
    )


def split_leading(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``castguard -q --color=no tune ...``: the console options given before the subcommand, and the rest."""
    lead: list[str] = []
    rest = list(argv)
    while rest and _GLOBAL.match(rest[0]):
        lead.append(rest.pop(0))
        if lead[-1] == "--color" and rest:
            lead.append(rest.pop(0))
    return lead, rest


@dataclass(frozen=True)
class Console:
    """Where a command's lines go: ``verbosity`` 0 normal, -1 ``-q``, -2 ``-qq``, 1+ ``-v``; ``colour`` paints
    the status words of stdout's lines."""

    verbosity: int = 0
    colour: bool = False
    out: TextIO | None = None  # None: sys.stdout at the time of printing (pytest's capsys swaps it)
    err: TextIO | None = None

    @classmethod
    def from_args(cls, *parsed: argparse.Namespace) -> Console:
        """The console the options ask for, adding up each parse's counts (before and after the subcommand); the
        last ``--color`` other than ``auto`` wins."""
        verbosity = sum(int(getattr(p, "verbose", 0) or 0) - int(getattr(p, "quiet", 0) or 0) for p in parsed)
        choices = [getattr(p, "color", "auto") for p in parsed if getattr(p, "color", "auto") != "auto"]
        return cls(verbosity=verbosity, colour=wants_colour(choices[-1] if choices else "auto", sys.stdout))

    def paint(self, line: str) -> str:
        """``line`` with its status words in colour (when this console colours)."""
        if not self.colour:
            return line
        return "".join(f"{_ANSI[colour]}{text}{_RESET}" if colour else text for text, colour in status_spans(line))

    def result(self, text: str) -> None:
        """The command's answer or verdict: hidden only by ``-qq``."""
        if self.verbosity > ERRORS_ONLY:
            print("\n".join(self.paint(line) for line in text.split("\n")), file=self.out or sys.stdout)

    def info(self, text: str, *, stderr: bool = False) -> None:
        """Progress and hints: hidden by ``-q``; on stderr where stdout carries the result (tune's progress)."""
        if self.verbosity > QUIET:
            stream = (self.err or sys.stderr) if stderr else (self.out or sys.stdout)
            print(self.paint(text) if not stderr else text, file=stream, flush=stderr)

    def detail(self, text: str) -> None:
        """More detail: only with ``-v``."""
        if self.verbosity > 0:
            print(text, file=self.out or sys.stdout)

    def error(self, text: str) -> None:
        """An error: always, on stderr."""
        print(text, file=self.err or sys.stderr)
