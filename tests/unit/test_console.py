"""``-q``/``-qq``/``-v`` and ``--color`` on the castguard CLI (issue 34 item 8, harness.core.console).

Every subcommand takes them, before or after its name. ``-q`` hides progress and hints (results, verdicts and
errors stay), ``-qq`` prints errors only, ``-v`` adds detail. Status words are coloured with ``--color=yes``,
never with ``--color=no``, and with ``auto`` only on a terminal without ``NO_COLOR``. Each test runs the real
command on a model built here, in an empty folder.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from harness.cli import build_parser, main
from harness.core.console import Console, status_spans, wants_colour
from tests.helpers.graphs import mlp_model, save
from tests.unit.data.test_flagnames import _dynamic, _int_input

REPO = Path(__file__).resolve().parents[2]
ESC = "\x1b["


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    printed = capsys.readouterr()
    return code, printed.out, printed.err


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder (a space in its path) holding one model, the current directory."""
    folder = tmp_path / "my project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("PY_COLORS", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    save(mlp_model(), folder / "m.onnx")
    return folder


def test_every_subcommand_takes_q_v_and_color() -> None:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    for name, subparser in sub.choices.items():  # type: ignore[attr-defined]
        if name in ("convert", "tune"):
            from harness.convert.cli import get_parser as convert_parser
            from harness.tune.cli import get_parser as tune_parser

            subparser = {"convert": convert_parser, "tune": tune_parser}[name]()
        flags = set(subparser._option_string_actions)
        assert {"-q", "--quiet", "-v", "--verbose", "--color"} <= flags, name
    assert {"-q", "-v", "--color"} <= set(parser._option_string_actions)


def test_goldens_q_hides_hints_qq_everything_v_adds_detail(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "goldens", "--model", "m.onnx", "-q")
    assert code == 0 and "m: golden written:" in out and "review it" not in out  # the hint is info
    code, normal, _ = _run(capsys, "goldens", "--model", "m.onnx")
    assert code == 0 and normal.strip() == "m: pass"
    assert _run(capsys, "goldens", "--model", "m.onnx", "-q")[1] == normal  # the verdict stays
    assert _run(capsys, "goldens", "--model", "m.onnx", "-qq")[1] == ""
    verbose = _run(capsys, "goldens", "--model", "m.onnx", "-v")[1]
    assert "m: 1 iteration(s); outputs y" in verbose and "m: pass" in verbose and "iteration" not in normal


def test_both_positions_and_both_spellings_add_up(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(capsys, "goldens", "--model", "m.onnx")
    normal = _run(capsys, "goldens", "--model", "m.onnx")[1]
    assert _run(capsys, "-q", "goldens", "--model", "m.onnx")[1] == normal  # -q keeps the verdict
    assert _run(capsys, "-q", "goldens", "--model", "m.onnx", "--quiet")[1] == ""  # -q + -q = -qq
    assert _run(capsys, "--quiet", "--quiet", "goldens", "--model", "m.onnx")[1] == ""
    assert _run(capsys, "-qq", "goldens", "--model", "m.onnx")[1] == ""
    assert "iteration(s)" in _run(capsys, "-v", "goldens", "--model", "m.onnx")[1]
    assert _run(capsys, "--verbose", "-q", "goldens", "--model", "m.onnx")[1] == normal  # they cancel out
    assert _run(capsys, "-qv", "goldens", "--model", "m.onnx", "-vq")[1] == normal
    listing = _run(capsys, "models")[1]
    assert "mnist" in listing and _run(capsys, "-q", "models")[1] == listing
    assert _run(capsys, "models", "-qq")[1] == ""


def test_errors_print_at_qq(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "-qq", "goldens", "--model", "missing.onnx")
    assert code == 2 and out == "" and "missing.onnx" in err and "fix:" in err


def test_colour_on_the_status_word(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(capsys, "goldens", "--model", "m.onnx")
    assert _run(capsys, "goldens", "--model", "m.onnx", "--color=yes")[1] == "m: \x1b[32mpass\x1b[0m\n"
    assert _run(capsys, "--color", "yes", "goldens", "--model", "m.onnx")[1] == "m: \x1b[32mpass\x1b[0m\n"
    assert ESC not in _run(capsys, "goldens", "--model", "m.onnx", "--color=no")[1]
    assert ESC not in _run(capsys, "goldens", "--model", "m.onnx")[1]  # auto: capsys is no terminal


def test_piped_output_has_no_colour_unless_asked(project: Path) -> None:
    def piped(*args: str, **env: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "harness", "goldens", "--model", "m.onnx", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), **env},
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    piped()  # writes the golden
    assert piped() == "m: pass\n"
    assert piped("--color=yes") == "m: \x1b[32mpass\x1b[0m\n"
    assert piped("--color=no", FORCE_COLOR="1") == "m: pass\n"


def test_auto_colour_follows_the_terminal_and_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for name in ("NO_COLOR", "PY_COLORS", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert wants_colour("auto", Terminal()) and not wants_colour("auto", io.StringIO())
    assert wants_colour("yes", io.StringIO()) and not wants_colour("no", Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_colour("auto", Terminal()) and wants_colour("yes", Terminal())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not wants_colour("auto", Terminal())


def test_the_status_words_and_only_them() -> None:
    line = "castguard: 4 cases: 1 pass, 1 fail, 1 xfail, 1 error; report: x (error/bound 3)"
    coloured = [(text, colour) for text, colour in status_spans(line) if colour]
    assert coloured == [("pass", "green"), ("fail", "red"), ("xfail", "yellow"), ("error", "red")]
    assert "".join(text for text, _ in status_spans(line)) == line
    assert [c for _, c in status_spans("a / b: pass -> fail (error/bound 3)") if c] == ["green", "red"]
    assert status_spans("error per output: y 0.1; passes the bound") == [
        ("error per output: y 0.1; passes the bound", None)
    ]
    assert Console(colour=False).paint(line) == line


def _tune(capsys: pytest.CaptureFixture[str], folder: Path, *flags: str) -> tuple[int, str, str]:
    model = save(_int_input(), folder / "t.onnx")
    args = ["--onnx_path", str(model), "--output_path", str(folder / "t.out.onnx"), "--no_cache"]
    return _run(capsys, *flags[:1], "tune", *args, "--adversarial_examples", "0", *flags[1:])


def _untimed(summary: str) -> list[str]:
    return [line for line in summary.splitlines() if not line.startswith("evaluations: ")]


def test_tune_q_hides_progress_keeps_the_summary(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _tune(capsys, project, "--color=no")
    assert code == 0 and "[castguard tune] evaluation 1/" in err and "verdict: the plan holds" in out
    for flags in (("-q",), ("--color=no", "-q"), ("--color=no", "--quiet")):  # before or after "tune"
        code, quiet_out, quiet_err = _tune(capsys, project, *flags)
        assert code == 0 and "evaluation" not in quiet_err and _untimed(quiet_out) == _untimed(out), flags
    code, out, err = _tune(capsys, project, "-qq")
    assert code == 0 and out == "" and "evaluation" not in err


def _convert(
    folder: Path, *flags: str, build: Callable[[], onnx.ModelProto] = _int_input
) -> subprocess.CompletedProcess[str]:
    """The real console script: convert's log goes through logging, set up once per process."""
    model = save(build(), folder / "c.onnx")
    lead, rest = [f for f in flags if f.startswith("lead")], [f for f in flags if not f.startswith("lead")]
    return subprocess.run(
        [sys.executable, "-m", "harness", *(f[4:] for f in lead), "convert", "--onnx_path", str(model), *rest],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )


def test_convert_q_keeps_warnings_and_the_saved_line(project: Path) -> None:
    normal = _convert(project)
    assert normal.returncode == 0 and "INFO - reference data" in normal.stderr
    assert normal.stdout.startswith("converted model saved to ") and "- DEBUG -" not in normal.stderr
    for quiet in (_convert(project, "-q"), _convert(project, "lead-q")):
        assert quiet.returncode == 0 and "INFO" not in quiet.stderr and quiet.stdout == normal.stdout
    warned = _convert(project, "-q", build=_dynamic)  # dynamic dims nobody sized: a warning
    assert "WARNING - dynamic dims without a size" in warned.stderr and "INFO" not in warned.stderr
    quieter = _convert(project, "-qq", build=_dynamic)
    assert quieter.returncode == 0 and quieter.stdout == "" and quieter.stderr == ""
    verbose = _convert(project, "-v")
    assert verbose.returncode == 0 and "- DEBUG -" in verbose.stderr
