"""castguard touches pytest internals in two places, fenced by a tested version range (issue 34 item 11).

harness/plugin/rootdir.py re-decides the rootdir (``Config._rootpath``, ``_inipath``, the ini values, ``_inicache``,
``_parser.extra_info``) and harness/plugin/aliases.py reads ``Parser._groups``. pyproject declares ``pytest>=8.0,<10``;
this checks that the installed pytest is inside that range and still has every attribute castguard writes or reads,
on a real Config. A pytest that moves one of them fails here (and the version bound keeps users off an untested one).
CI runs it at both ends: the floors leg (pytest 8.0) and the newest.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.files import read_toml
from harness.plugin.rootdir import _ini_attribute

ROOT = Path(__file__).resolve().parents[3]


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


def test_the_installed_pytest_is_in_the_declared_range() -> None:
    project = read_toml(ROOT / "pyproject.toml", what="pyproject.toml")["project"]  # type: ignore[index]
    (requirement,) = [r for r in project["dependencies"] if r.replace(" ", "").startswith("pytest>=")]
    match = re.fullmatch(r"pytest>=([\d.]+),<([\d.]+)", requirement.replace(" ", ""))
    assert match, f"{requirement}: pytest needs a floor and an upper bound"
    low, high = _release(match[1]), _release(match[2])
    assert low <= _release(pytest.__version__) < high, f"pytest {pytest.__version__} is outside {requirement}"


def test_the_internals_castguard_uses_exist_on_this_pytest(pytestconfig: pytest.Config) -> None:
    """This run's own Config (castguard is loaded into it by its entry point)."""
    config = pytestconfig
    for name in ("_rootpath", "_inipath", "_inicache", "_parser"):
        assert hasattr(config, name), f"pytest {pytest.__version__}: Config.{name} is gone"
    assert _ini_attribute(config) is not None, "the parsed ini values moved"
    assert isinstance(config._parser.extra_info, dict)
    groups = config._parser._groups
    assert any("--castguard-model" in option.names() for group in groups for option in group.options)
    assert hasattr(config, "known_args_namespace") and hasattr(config.known_args_namespace, "file_or_dir")
