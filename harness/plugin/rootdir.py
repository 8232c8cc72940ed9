"""Undo pytest's rootdir guess from castguard's option values, so ``--model PATH`` works like ``--model=PATH``.

pytest picks its rootdir and ini file before any plugin is loaded, from every command-line argument that names an
existing path. It does not know castguard's options yet, so in ``pytest --model /data/bert/model.onnx`` the value
looks like a test path: the rootdir becomes ``/data/bert`` (``.pytest_cache`` is written next to the model) and the
user's own ini file (``[tool.pytest.ini_options]``) is not read. Written ``--model=/data/bert/model.onnx``, the
value is one argument starting with ``-`` and pytest ignores it.

:func:`correct_rootdir` runs first in ``pytest_load_initial_conftests``, when castguard's options are parsed: it
asks pytest's own :func:`~_pytest.config.findpaths.determine_setup` again with the real test paths only (the
option values removed), and when that gives another rootdir or ini file it installs that one, with its
``addopts`` and ``pythonpath``, exactly as pytest would have done for the ``=`` form. Everything later (conftests,
``.pytest_cache``, node ids, the ``rootdir:`` header line) then uses it.

pytest has no public way to do this, so the private attributes it writes are fenced: pyproject bounds pytest to
``>=8.0,<10`` and tests/unit/plugin/test_rootdir.py checks, on the installed pytest, that each one is there.
"""

from __future__ import annotations

import copy
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from _pytest.config.findpaths import determine_setup

from harness.plugin.aliases import space_form_values


def drop_option_values(config: pytest.Config, args: list[str]) -> None:
    """Take castguard's ``--opt VALUE`` values out of the early parse's test paths: castguard's short option names
    are only added after the initial conftests (:mod:`harness.plugin.aliases`), so until then pytest reads
    ``--model PATH`` as an unknown flag and a test path (and would look for conftests beside the model)."""
    ns = config.known_args_namespace
    paths = [str(p) for p in ns.file_or_dir]
    for value in space_form_values(args):
        if value in paths:
            paths.remove(value)
    ns.file_or_dir = paths


def _setup_without_option_values(config: pytest.Config) -> tuple[Path, Path | None, Any, Any]:
    ns = config.known_args_namespace
    kwargs: dict[str, Any] = {
        "inifile": None,
        "args": list(ns.file_or_dir),
        "rootdir_cmd_arg": None,
        "invocation_dir": config.invocation_params.dir,
    }
    if "override_ini" in inspect.signature(determine_setup).parameters:
        kwargs["override_ini"] = ns.override_ini
    found = determine_setup(**kwargs)
    return found[0], found[1], found[2], found[3] if len(found) > 3 else None


def _ini_attribute(config: pytest.Config) -> str | None:
    """Where this pytest keeps the parsed ini values (``_inicfg`` from pytest 9, ``inicfg`` before)."""
    if isinstance(config.__dict__.get("_inicfg"), dict):
        return "_inicfg"
    if isinstance(config.__dict__.get("inicfg"), dict):
        return "inicfg"
    return None


def correct_rootdir(config: pytest.Config, args: list[str]) -> Path | None:
    """Re-decide rootdir and ini file without castguard's option values; returns the old rootdir when it changed.

    Nothing changes when the user chose them (``--rootdir``, ``-c``) or when the option values did not move them.
    """
    drop_option_values(config, args)
    ns = config.known_args_namespace
    if getattr(ns, "rootdir", None) or getattr(ns, "inifilename", None):
        return None
    rootpath, inipath, inicfg, ignored = _setup_without_option_values(config)
    old_root, old_ini = config.rootpath, config.inipath
    if rootpath == old_root and inipath == old_ini:
        return None
    attribute = _ini_attribute(config)
    if attribute is None or not hasattr(config, "_rootpath") or not hasattr(config, "_inipath"):
        raise pytest.UsageError(
            f"rootdir {old_root}: pytest took this folder from a castguard option value and this pytest "
            f"version ({pytest.__version__}) cannot be corrected; write path options with '=' "
            "(--model=PATH) or pass --rootdir=."
        )
    old_addopts = [str(a) for a in config.getini("addopts")]
    old_paths = [str(p) for p in config.getini("pythonpath")]
    config._rootpath = rootpath
    config._inipath = inipath
    setattr(config, attribute, inicfg)
    config._inicache.clear()
    if ignored is not None and hasattr(config, "_ignored_config_files"):
        config._ignored_config_files = ignored
    config._parser.extra_info["rootdir"] = str(rootpath)
    config._parser.extra_info["inifile"] = str(inipath)
    before = list(args)
    if old_addopts and args[: len(old_addopts)] == old_addopts:
        del args[: len(old_addopts)]
    new_addopts = [str(a) for a in config.getini("addopts")]
    args[:0] = new_addopts
    config.pluginmanager.consider_preparse(new_addopts, exclude_only=False)  # -p NAME / -p no:NAME in them
    if args != before:  # the right ini's addopts: parse them as pytest would have
        config.known_args_namespace = ns = config._parser.parse_known_args(args, namespace=copy.copy(config.option))
        drop_option_values(config, args)
    for path in old_paths:
        if path in sys.path:
            sys.path.remove(path)
    for path in reversed([str(p) for p in config.getini("pythonpath")]):
        sys.path.insert(0, path)
    derived_cut = str(old_ini.parent) if old_ini is not None else str(old_root)
    if ns.confcutdir is None or ns.confcutdir == derived_cut:
        ns.confcutdir = str(inipath.parent) if inipath is not None else str(rootpath)
    return old_root
