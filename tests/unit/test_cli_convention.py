"""One command-line convention (issue 34 item 8).

Dashes everywhere, and both spellings (``--cache-dir`` / ``--cache_dir``) accepted in every subcommand, AutoCast's
underscore flags in ``castguard convert`` included (harness.core.argv); ``castguard --version``; ``castguard convert``
in its own usage line; a quiet exit on a closed pipe; no ``CASTGUARD_...`` metavars; castguard's pytest lines honour
``-q`` and ``-qq``, and colour the status words as pytest's ``--color`` says (tests/unit/test_console.py: the CLI).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.convert.cli import get_parser as convert_parser
from harness.core.argv import ArgumentParser, respell
from harness.core.version import __version__
from harness.tune.cli import get_parser as tune_parser

REPO = Path(__file__).resolve().parents[2]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = {"convert": convert_parser(), "tune": tune_parser()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update({name: sub for name, sub in action.choices.items() if name not in found})
    return found


def _other(flag: str) -> str:
    body = flag[2:]
    return "--" + (body.replace("-", "_") if "-" in body else body.replace("_", "-"))


@pytest.mark.parametrize("name", sorted(_subparsers(build_parser())))
def test_every_long_flag_of_every_subcommand_takes_both_spellings(name: str) -> None:
    parser = _subparsers(build_parser())[name]
    known = frozenset(parser._option_string_actions)
    flags = [f for f in known if f.startswith("--") and _other(f) != f and _other(f) not in known]
    assert isinstance(parser, ArgumentParser), f"castguard {name} parses with plain argparse"
    for flag in flags:
        assert respell([_other(flag), "x"], known) == [flag, "x"]
        assert respell([f"{_other(flag)}=x"], known) == [f"{flag}=x"]


def test_the_issues_examples_parse() -> None:
    cache = build_parser().parse_args(["cache", "--cache_dir", "c", "--report_dir=r", "--max_mb", "5"])
    assert (cache.cache_dir, cache.report_dir, cache.max_mb) == ("c", "r", 5)
    tune = tune_parser().parse_args(["--onnx-path", "m.onnx", "--cache-dir", "d", "--max-error", "0.1"])
    assert (tune.onnx_path, tune.cache_dir) == ("m.onnx", "d")
    convert = convert_parser().parse_args(["--onnx_path", "m.onnx", "--low-precision-type", "bf16", "--keep_io_types"])
    assert (convert.onnx_path, convert.low_precision_type, convert.keep_io_types) == ("m.onnx", "bf16", True)
    goldens = build_parser().parse_args(["goldens", "--model", "m", "--goldens_dir", "g", "--input_shapes", "x:1x2"])
    assert goldens.castguard_goldens_dir == "g" and goldens.castguard_input_shapes == ["x:1x2"]
    assert respell(["--", "--cache_dir"], frozenset({"--cache-dir"})) == ["--", "--cache_dir"]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"castguard {__version__}"


def test_convert_names_itself_castguard_convert(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: castguard convert ") and "harness.convert" not in out


def test_no_metavar_is_a_dest_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["goldens", "--help"])
    out = capsys.readouterr().out
    assert "--seed N" in out and "CASTGUARD_" not in out


def _closed_pipe_run(*args: str) -> subprocess.CompletedProcess[bytes]:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before castguard writes a byte
    with open(os.devnull, "rb") as stdin:
        proc = subprocess.run(
            [sys.executable, "-m", "harness", *args],
            stdin=stdin,
            stdout=write,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=120,
        )
    os.close(write)
    return subprocess.CompletedProcess(proc.args, proc.returncode, b"", proc.stderr)


def test_a_closed_pipe_ends_quietly() -> None:
    for args in (["models"], ["--help"]):
        run = _closed_pipe_run(*args)
        assert b"Traceback" not in run.stderr and b"BrokenPipe" not in run.stderr, run.stderr.decode()
        assert run.returncode in (0, 141), run.returncode


def test_castguards_pytest_lines_honour_q_qq_and_color(tmp_path: Path) -> None:
    def pytest_lines(*flags: str) -> str:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--model", "mnist.onnx", "--precision", "fp16", "--data-max", "512",
             "--exclude-ops", "none", "-p", "no:cacheprovider", *flags],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        return run.stdout

    first = pytest_lines()  # writes the golden; piped, --color=auto: no colour
    assert "castguard: 1 case:" in first and "\x1b[" not in first
    normal, quiet, quieter = pytest_lines("--color=no"), pytest_lines("-q", "--color=yes"), pytest_lines("-qq")
    assert "castguard sweep report" in normal and "castguard: 1 case: 1 pass" in normal and "\x1b[" not in normal
    assert "castguard inputs of mnist" in normal  # every section, not the first only
    assert "castguard sweep report" not in quiet and "castguard: 1 case: 1 \x1b[32mpass\x1b[0m;" in quiet
    assert "castguard inputs of mnist" in quiet
    assert "castguard" not in quieter
