"""Reading castguard's own files: the one TOML reader (``pyproject.toml``, ``--sweep`` files).

``tomllib`` is in the standard library from Python 3.11; on 3.10 the ``tomli`` backport (a declared dependency
there, same API) is used. Every other module reads TOML through :func:`read_toml`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from harness.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib


def read_toml(path: Path, *, what: str) -> dict[str, object]:
    """Parse a TOML file; a missing, unreadable or malformed file is a UserError naming it."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise UserError(where=path, problem=f"{what} not found", fix="check the path") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UserError(where=path, problem=f"{what} is not valid TOML: {err}", fix="fix the TOML syntax") from err
