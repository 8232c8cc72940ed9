"""``HarnessConfig``: one frozen configuration from ``[tool.castguard]`` (pyproject.toml) and the command line.

Precedence: command line > ``[tool.castguard]`` in the rootdir's pyproject.toml > the dataclass defaults.
Paths from pyproject are relative to the rootdir; paths from the command line to the invocation directory.
Keys of ``[tool.castguard]`` that belong to other parts of castguard (report, sweep, tolerances) are left to
them; the keys read here are :data:`harness.options.DESTS` except :data:`CLI_ONLY` (``--model`` decides what
pytest collects, and a permanent ``--update-goldens`` would rewrite goldens on every run).
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.inputs import parse_input_shape, parse_val_range
from harness.options import DESTS
from harness.runners import RUNNER_NAMES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CPU_PROVIDER = "CPUExecutionProvider"
CLI_ONLY = frozenset({"models", "update_goldens"})


@dataclass(frozen=True)
class HarnessConfig:
    """Everything ``pytest --model`` needs, validated."""

    models: tuple[str, ...] = ()
    runners: tuple[str, ...] = ("emulate",)
    goldens_dir: Path = Path("goldens")
    update_goldens: bool = False
    val_ranges: tuple[tuple[str, float, float], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    inputs_file: Path | None = None
    seed: int = 0
    iterations: int = 1
    ort_providers: tuple[str, ...] = (CPU_PROVIDER,)

    def __post_init__(self) -> None:
        bad = [r for r in self.runners if r not in RUNNER_NAMES]
        if bad or not self.runners:
            raise UserError(where="--runner", problem=f"unknown runner(s) {bad}" if bad else "no runner selected",
                            fix=f"use one or more of: {', '.join(RUNNER_NAMES)}")
        if len(set(self.runners)) != len(self.runners):
            raise UserError(where="--runner", problem=f"runner given twice in {list(self.runners)}",
                            fix="name each runner once")
        if self.iterations < 1:
            raise UserError(where="--iterations", problem=f"must be >= 1, got {self.iterations}",
                            fix="pass --iterations 1 or more")
        if self.inputs_file is not None and (self.val_ranges or self.input_shapes):
            raise UserError(where="--inputs", problem="cannot be combined with --val-range or --input-shapes",
                            fix="drop one: an inputs file already fixes the values and shapes")
        if not self.ort_providers:
            raise UserError(where="--ort-providers", problem="empty provider list",
                            fix=f"e.g. --ort-providers {CPU_PROVIDER}")

    @classmethod
    def from_sources(cls, *, cli: Mapping[str, Any], table: Mapping[str, Any], rootdir: Path,
                     invocation_dir: Path) -> HarnessConfig:
        """Merge parsed command-line options (by dest, ``None`` = not given) over a ``[tool.castguard]`` table."""
        raw: dict[str, tuple[Any, str, Path]] = {}
        for dest, key in DESTS.items():
            if cli.get(dest) is not None:
                raw[key] = (cli[dest], f"--{key.replace('_', '-')}", invocation_dir)
            elif key in CLI_ONLY and key in table:
                raise UserError(where=f"[tool.castguard] {key}", problem="can only be given on the command line",
                                fix=f"remove it from pyproject.toml and pass --{key.replace('_', '-')} when needed")
            elif key in table:
                raw[key] = (table[key], f"[tool.castguard] {key}", rootdir)
        kwargs: dict[str, Any] = {}
        for key, (value, where, base) in raw.items():
            kwargs.update(_convert(key, value, where=where, base=base))
        kwargs.setdefault("goldens_dir", rootdir / "goldens")
        return cls(**kwargs)


def _strings(value: Any, *, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise UserError(where=where, problem=f"expected a string or a list of strings, got {value!r}",
                    fix='e.g. runners = ["emulate"]')


def _int(value: Any, *, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(where=where, problem=f"expected an integer, got {value!r}", fix="e.g. seed = 0")
    return value


def _convert(key: str, value: Any, *, where: str, base: Path) -> dict[str, Any]:
    if key == "models":
        return {"models": tuple(_strings(value, where=where))}
    if key == "runners":
        names = [n.strip() for v in _strings(value, where=where) for n in v.split(",") if n.strip()]
        return {"runners": tuple(names)}
    if key == "goldens_dir":
        return {"goldens_dir": (base / _strings(value, where=where)[0]).resolve()}
    if key == "update_goldens":
        return {"update_goldens": bool(value)}
    if key == "val_ranges":
        return {"val_ranges": tuple(parse_val_range(v) for v in _strings(value, where=where))}
    if key == "input_shapes":
        return {"input_shapes": tuple(parse_input_shape(v) for v in _strings(value, where=where))}
    if key == "inputs":
        return {"inputs_file": (base / _strings(value, where=where)[0]).resolve()}
    if key == "ort_providers":
        names = [n.strip() for v in _strings(value, where=where) for n in v.split(",") if n.strip()]
        return {"ort_providers": tuple(names)}
    return {key: _int(value, where=where)}


def load_table(rootdir: Path) -> dict[str, Any]:
    """``[tool.castguard]`` of ``rootdir/pyproject.toml`` (empty when there is none)."""
    path = rootdir / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UserError(where=path, problem=f"not valid TOML: {err}", fix="fix the syntax of pyproject.toml") from err
    table = data.get("tool", {}).get("castguard", {})
    if not isinstance(table, dict):
        raise UserError(where=path, problem="[tool.castguard] is not a table", fix="write it as [tool.castguard]")
    return table
