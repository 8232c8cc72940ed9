"""castguard's one command-line convention (stdlib only): dashes in every flag, and both spellings accepted.

:class:`ArgumentParser` is argparse's, except that a long flag written with the other separator (``--cache_dir``
for ``--cache-dir``, or AutoCast's ``--onnx_path`` written ``--onnx-path``) is read as the flag the parser declares;
sub-commands made from it inherit this. :func:`quiet_pipe` ends a command whose reader went away
(``castguard ... | head``) quietly, as ``cat`` does, instead of with a BrokenPipe traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any


def respell(args: Sequence[str], known: set[str] | frozenset[str]) -> list[str]:
    """``args`` with every long flag that the parser does not know, but knows in the other spelling (``_`` for
    ``-`` or back), written as the parser knows it. Nothing after ``--`` is touched."""
    out: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            return out + list(args[index:])
        flag, eq, value = arg.partition("=")
        if flag.startswith("--") and flag not in known:
            for other in ("--" + flag[2:].replace("_", "-"), "--" + flag[2:].replace("-", "_")):
                if other in known:
                    flag = other
                    break
        out.append(flag + eq + value)
    return out


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, accepting both spellings of every long flag (see the module docstring)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(respell(given, frozenset(self._option_string_actions)), namespace)


def quiet_pipe(main: Callable[[], int]) -> int:
    """Run ``main``; a closed stdout (``| head``) ends it with status 141 (SIGPIPE's), silently."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # Python would flush stdout again at exit and complain
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def version_action(parser: argparse.ArgumentParser, version: str, **kwargs: Any) -> None:
    """``--version``: ``castguard X.Y.Z``."""
    parser.add_argument("--version", action="version", version=f"castguard {version}", **kwargs)
