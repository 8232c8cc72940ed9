"""``HarnessConfig``: one frozen configuration from ``[tool.castguard]`` (pyproject.toml) and the command line.

Precedence: command line > ``[tool.castguard]`` in the rootdir's pyproject.toml > the dataclass defaults.
Paths from pyproject are relative to the rootdir; paths from the command line to the invocation directory.
The keys read here are :data:`harness.options.DESTS` except :data:`CLI_ONLY` (``--model`` decides what
pytest collects, and a permanent ``--update-goldens`` would rewrite goldens on every run), plus two tables:

* ``[tool.castguard.sweep]`` -> :attr:`HarnessConfig.sweep`, layered by :func:`harness.sweep.build_sweep_spec`:
  defaults < ``[tool.castguard] runners`` < ``[tool.castguard.sweep]`` < ``--sweep FILE`` < sweep options;
* ``[tool.castguard.tolerances]`` -> :attr:`HarnessConfig.tolerances` (:func:`harness.judge.tolerances.parse_tolerance_policy`).

Other keys of ``[tool.castguard]`` belong to other parts of castguard and are left to them.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.data.recipes import parse_input_shape, parse_val_range
from harness.options import DESTS, SWEEP_DESTS, SWEEP_FILE_DEST
from harness.sweep.grid import check_runner
from harness.sweep import SweepOptions, SweepSpec, build_sweep_spec, read_toml
from harness.judge.tolerances import TolerancePolicy, parse_tolerance_policy

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CPU_PROVIDER = "CPUExecutionProvider"
CLI_ONLY = frozenset({"models", "update_goldens"})
SWEEP_LAYER = frozenset({"runners"})   # [tool.castguard] keys that are read as a layer of the sweep


@dataclass(frozen=True)
class HarnessConfig:
    """Everything ``pytest --model`` needs, validated."""

    models: tuple[str, ...] = ()
    goldens_dir: Path = Path("goldens")
    update_goldens: bool = False
    val_ranges: tuple[tuple[str, float, float], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    inputs_file: Path | None = None
    seed: int = 0
    iterations: int = 1
    ort_providers: tuple[str, ...] = (CPU_PROVIDER,)
    sweep: SweepSpec = SweepSpec()
    tolerances: TolerancePolicy = TolerancePolicy()
    report_dir: Path = Path("castguard-report")
    cache_dir: Path = Path(".castguard-cache")
    tune: bool = False
    """``--tune`` / ``[tool.castguard] tune = true``: add a tuned case per precision."""

    @property
    def runners(self) -> tuple[str, ...]:
        """The sweep's runner axis."""
        return self.sweep.runners

    def __post_init__(self) -> None:
        for runner in self.runners:
            check_runner(runner, where="--runner")
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
            if key in SWEEP_LAYER:
                continue
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
        kwargs.setdefault("report_dir", rootdir / "castguard-report")
        kwargs.setdefault("cache_dir", rootdir / ".castguard-cache")
        where = f"{rootdir / 'pyproject.toml'} [tool.castguard"
        tolerances = table.get("tolerances", {})
        if not isinstance(tolerances, dict):
            raise UserError(where=f"{where}.tolerances]", problem="not a table", fix="write [tool.castguard.tolerances]")
        return cls(**kwargs, sweep=sweep_spec(cli=cli, table=table, where=where, invocation_dir=invocation_dir),
                   tolerances=parse_tolerance_policy(tolerances, where=f"{where}.tolerances]"))


def sweep_spec(*, cli: Mapping[str, Any], table: Mapping[str, Any], where: str, invocation_dir: Path) -> SweepSpec:
    """The sweep: defaults < ``[tool.castguard] runners`` < ``[tool.castguard.sweep]`` < ``--sweep`` < options."""
    sweep_table = table.get("sweep", {})
    layers: list[tuple[str, Mapping[str, object]]] = []
    if "runners" in table:
        if isinstance(sweep_table, Mapping) and "runners" in sweep_table:
            raise UserError(where=f"{where}] runners", problem="runners are also set in [tool.castguard.sweep]",
                            fix="keep one: [tool.castguard.sweep] runners")
        layers.append((f"{where}] runners", {"runners": table["runners"]}))
    if "sweep" in table:
        layers.append((f"{where}.sweep]", sweep_table))
    if cli.get(SWEEP_FILE_DEST) is not None:
        path = (invocation_dir / cli[SWEEP_FILE_DEST]).resolve()
        layers.append((f"--sweep {path}", read_toml(path, what="sweep file")))
    given = {field: cli[dest] for dest, field in SWEEP_DESTS.items() if cli.get(dest) is not None}
    if "exclude_ops" in given:
        given["exclude_ops"] = tuple(given["exclude_ops"])
    runners = cli.get("castguard_runners")
    options = SweepOptions(**given, runners=",".join(runners) if runners is not None else None)
    return build_sweep_spec(tables=layers, options=options)


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
    if key in ("goldens_dir", "report_dir", "cache_dir"):
        return {key: (base / _strings(value, where=where)[0]).resolve()}
    if key == "update_goldens":
        return {"update_goldens": bool(value)}
    if key == "tune":
        if not isinstance(value, bool):
            raise UserError(where=where, problem=f"expected true or false, got {value!r}", fix="write tune = true")
        return {"tune": value}
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


def check_rootdir(rootdir: Path, *, ini_found: bool, invocation_dir: Path,
                  option_paths: Mapping[str, Sequence[str]]) -> None:
    """Refuse a rootdir that pytest took from one of castguard's path options (``{"--report-dir": [value]}``).

    pytest picks its rootdir before plugins load, reading every separate command-line argument that names an
    existing path, option values included: with ``--report-dir /elsewhere/out`` (existing) and no ini file
    there, ``/elsewhere/out`` (or the common ancestor of it and the current folder) becomes the rootdir, and
    castguard would look for pyproject.toml and ``goldens/`` there. Without an ini file, a rootdir other than the
    current folder that holds one of these paths can only have come from them.
    """
    root = rootdir.resolve()
    if ini_found or invocation_dir.resolve() == root:
        return
    for flag, values in option_paths.items():
        for value in values:
            path = (invocation_dir / value).resolve()
            if path.exists() and path.is_relative_to(root) and not path.is_relative_to(invocation_dir.resolve()):
                raise UserError(where=f"rootdir {rootdir}",
                                problem=f"pytest took this folder as its rootdir because {flag} {value} names it, "
                                        "so castguard would not find your pyproject.toml and goldens",
                                fix=f"write path options with '=' ({flag}={value}), or pass --rootdir=.")
