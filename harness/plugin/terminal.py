"""castguard on pytest's terminal: the live line of long case steps (:func:`live_line`, written past output capture)
and the run's end sections as pytest prints its own (:func:`write_sections`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harness.core.console import status_spans
from harness.core.liveline import LiveLine

if TYPE_CHECKING:
    from harness.conductor import Section


def live_line(config: pytest.Config) -> LiveLine | None:
    """The live line of long case steps on pytest's terminal, written past output capture; None under -q."""
    if config.get_verbosity() < 0:
        return None

    def write(text: str) -> None:  # looked up now: castguard's pytest_configure may run before the terminal's
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(text)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(text)

    return LiveLine(write=write)


def write_sections(terminalreporter: pytest.TerminalReporter, sections: list[Section]) -> None:
    """The sections as pytest prints its own: ``-q`` drops the separators (the lines stay: they say why a run
    failed), ``-qq`` prints nothing (the exit status and the report files say the rest)."""
    verbosity = int(terminalreporter.config.option.verbose)
    if verbosity <= -2:
        return
    for section in sections:
        if section.title and verbosity >= 0:
            terminalreporter.write_sep("-", section.title)
        for line in section.lines:
            _write_painted(terminalreporter, line)


def _write_painted(terminalreporter: pytest.TerminalReporter, line: str) -> None:
    """One line, its status words (pass, fail, error...) in pytest's colours through the reporter's markup, which
    follows ``--color`` and ``NO_COLOR`` (:func:`harness.core.console.status_spans`)."""
    terminalreporter.ensure_newline()
    for text, colour in status_spans(line):
        terminalreporter.write(text, **({colour: True} if colour else {}))
    terminalreporter.line("")
