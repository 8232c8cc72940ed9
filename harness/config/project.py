"""The project folder (:func:`find_project`: where ``[tool.castguard]`` is declared) and its ``[tool.castguard]``
table (:func:`load_table`), every key of which must be one castguard reads (:data:`TABLE_KEYS`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.errors import UserError, unknown_key
from harness.core.files import read_toml
from harness.options import DESTS

SUB_TABLES = frozenset({"sweep", "tolerances"})  # [tool.castguard.sweep] and .tolerances: each checked by its reader
TABLE_KEYS = frozenset(DESTS.values()) | SUB_TABLES
"""Every key [tool.castguard] may hold: one per option that has a pyproject default (harness.options.DESTS, so a new
option's key is valid at once) and the sub-tables. Any other key is a usage error naming the nearest one."""


def load_table(rootdir: Path) -> dict[str, Any]:
    """``[tool.castguard]`` of ``rootdir/pyproject.toml`` (empty when there is none)."""
    path = rootdir / "pyproject.toml"
    if not path.is_file():
        return {}
    data = read_toml(path, what="pyproject.toml")
    tool = data.get("tool", {})
    table = tool.get("castguard", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise UserError(where=path, problem="[tool.castguard] is not a table", fix="write it as [tool.castguard]")
    for key in table:
        if key not in TABLE_KEYS:
            raise unknown_key(str(key), TABLE_KEYS, where=f"{path} [tool.castguard]", what="[tool.castguard] key")
    return table


def find_project(invocation_dir: Path, *, fallback: Path) -> Path:
    """castguard's project folder: the nearest of ``invocation_dir`` and its parents whose pyproject.toml has a
    ``[tool.castguard]`` table, else ``fallback`` (pytest's rootdir, or the folder the ``castguard`` CLI was
    given). ``goldens/``, ``castguard-report/`` and ``.castguard-cache/`` default to folders in it.

    It is found from where the command was typed, never from an option value: ``pytest --model /data/m.onnx``
    from a project uses that project's settings and goldens wherever the model lives.
    """
    for folder in (invocation_dir.resolve(), *invocation_dir.resolve().parents):
        if _declares_castguard(folder / "pyproject.toml"):
            return folder
    return fallback.resolve()


def _declares_castguard(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        tool = read_toml(path, what="pyproject.toml").get("tool", {})
    except UserError:
        return False  # not this search's business: load_table reports it if it is the project's file
    return isinstance(tool, dict) and "castguard" in tool
