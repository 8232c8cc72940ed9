"""``HarnessConfig``: one frozen configuration from ``[tool.castguard]`` (pyproject.toml) and the command line.

Precedence: command line > ``[tool.castguard]`` in the project's pyproject.toml > the dataclass defaults.
The project is found from the invocation directory (:func:`find_project`). Paths from pyproject are relative
to the project folder; paths from the command line to the invocation directory.
The keys read here are :data:`harness.options.DESTS` except :data:`CLI_ONLY` (``--model`` decides what
pytest collects, and a permanent ``--update-goldens`` would rewrite goldens on every run), plus two tables:

* ``[tool.castguard.sweep]`` -> :attr:`HarnessConfig.sweep`, layered by :func:`harness.sweep.build_sweep_spec`:
  defaults < ``[tool.castguard] runners`` < ``[tool.castguard.sweep]`` < ``--sweep FILE`` < sweep options;
* ``[tool.castguard.tolerances]`` -> :attr:`HarnessConfig.tolerances` (:func:`harness.judge.tolerances.parse_tolerance_policy`).

Other keys of ``[tool.castguard]`` belong to other parts of castguard and are left to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import UserError, unknown_key
from harness.core.files import read_toml
from harness.core.providers import CPU as CPU_PROVIDER
from harness.data.recipes import parse_input_shapes, parse_val_range
from harness.judge.tolerances import TolerancePolicy, parse_tolerance_policy
from harness.options import DESTS, SWEEP_DESTS, SWEEP_FILE_DEST
from harness.runners.options import RunnerOptionsTable, parse_runner_options
from harness.runners.registry import BUILTIN, check_clash
from harness.sweep import SweepOptions, SweepSpec, build_sweep_spec
from harness.sweep.checks import check_runner
from harness.sweep.expected import parse_patterns
from harness.sweep.shards import Shard, parse_shard

CLI_ONLY = frozenset({"models", "update_goldens"})
SUB_TABLES = frozenset({"sweep", "tolerances"})  # [tool.castguard.sweep] and .tolerances: each checked by its reader
TABLE_KEYS = frozenset(DESTS.values()) | SUB_TABLES
"""Every key [tool.castguard] may hold: one per option that has a pyproject default (harness.options.DESTS, so a new
option's key is valid at once) and the sub-tables. Any other key is a usage error naming the nearest one."""
SWEEP_LAYER = frozenset({"runners"})  # [tool.castguard] keys that are read as a layer of the sweep


@dataclass(frozen=True)
class HarnessConfig:
    """Everything ``pytest --model`` needs, validated."""

    models: tuple[str, ...] = ()
    goldens_dir: Path = Path("goldens")
    update_goldens: bool = False
    val_ranges: tuple[tuple[str, float, float], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    inputs_file: Path | None = None
    model_inputs: tuple[tuple[str, Path], ...] = ()
    """``--inputs KEY=FILE``: one model's own inputs file (model key, file), in a run over several models."""
    candidates: tuple[tuple[str, Path], ...] = ()
    """``--candidate KEY=FILE`` / ``[tool.castguard] candidates = {KEY = FILE}``: a model the user converted, judged
    against model KEY's FP32 golden (:func:`harness.pipeline.plan.candidate_cases`)."""
    seed: int = 0
    iterations: int = 1
    ort_providers: tuple[str, ...] = (CPU_PROVIDER,)
    sweep: SweepSpec = SweepSpec()
    tolerances: TolerancePolicy = TolerancePolicy()
    report_dir: Path = Path("castguard-report")
    cache_dir: Path = Path(".castguard-cache")
    project_dir: Path | None = None  # decides the keys of models given by path; None: goldens_dir.parent

    @property
    def project(self) -> Path:
        return self.project_dir if self.project_dir is not None else self.goldens_dir.parent

    keep_runs: int = 3  # finished runs/<id>/ folders kept in the report folder
    cache_max_mb: int = 2048  # LRU cap of the cache folder (0: no cap)
    tune: bool = False
    """``--tune`` / ``[tool.castguard] tune = true``: add a tuned case per precision."""
    shard: Shard | None = None
    """``--shard K/N`` / ``[tool.castguard] shard = "K/N"``: run only this shard's part (harness.sweep.shards)."""
    trt_build_check: bool | None = None
    """``--trt-build-check`` / ``--no-trt-build-check`` / ``[tool.castguard] trt_build_check``; None: on when a
    TensorRT module is installed (:mod:`harness.pipeline.build_check`)."""
    diagnose: bool = True
    """``--no-diagnose`` / ``[tool.castguard] diagnose = false``: skip the diagnosis of failing cases (the
    divergence profile and the verified fix: the costliest step of a failing case at deploy shapes)."""
    runner_options: RunnerOptionsTable = ()
    """``--runner-option NAME:key=value`` / ``[tool.castguard] runner_options = {NAME = {key = value}}``."""
    runner_timeout: float | None = None
    """``--runner-timeout`` / ``[tool.castguard] runner_timeout``: seconds for a runner plugin's child process;
    None: fitted to the model (:func:`harness.runners.isolated.fit_timeout`)."""
    xfail: tuple[str, ...] = ()
    """``--xfail PATTERN`` + ``[tool.castguard] xfail``: sweep cases expected to fail (harness.sweep.expected)."""

    @property
    def runners(self) -> tuple[str, ...]:
        """The sweep's runner axis."""
        return self.sweep.runners

    def __post_init__(self) -> None:
        for runner in self.runners:
            check_runner(runner, where="--runner")
            check_clash(runner)  # a name two packages register: one usage error where it is used (issue 33.6)
        for runner, _ in self.runner_options:
            check_runner(runner, where="runner_options")
            if runner in BUILTIN:
                raise UserError(
                    where=f"runner_options {runner}",
                    problem=f"castguard's own runner {runner!r} takes no runner options",
                    fix="drop them: runner options are for runner plugins (--runner-option NAME:key=value)",
                )
        if self.iterations < 1:
            raise UserError(
                where="--iterations", problem=f"must be >= 1, got {self.iterations}", fix="pass --iterations 1 or more"
            )
        if self.inputs_file is not None and (self.val_ranges or self.input_shapes):
            raise UserError(
                where="--inputs",
                problem="cannot be combined with --val-range or --input-shapes",
                fix="drop one: an inputs file already fixes the values and shapes",
            )
        if self.keep_runs < 1:
            raise UserError(
                where="keep_runs",
                problem=f"must be >= 1, got {self.keep_runs}",
                fix="keep at least the run that wrote the report, e.g. keep_runs = 3",
            )
        if self.cache_max_mb < 0:
            raise UserError(
                where="cache_max_mb",
                problem=f"must be >= 0, got {self.cache_max_mb}",
                fix="e.g. cache_max_mb = 2048 (0: no cap)",
            )
        if not self.ort_providers:
            raise UserError(
                where="--ort-providers", problem="empty provider list", fix=f"e.g. --ort-providers {CPU_PROVIDER}"
            )

    @classmethod
    def from_sources(
        cls, *, cli: Mapping[str, Any], table: Mapping[str, Any], rootdir: Path, invocation_dir: Path
    ) -> HarnessConfig:
        """Merge parsed command-line options (by dest, ``None`` = not given) over a ``[tool.castguard]`` table."""
        raw: dict[str, tuple[Any, str, Path]] = {}
        for dest, key in DESTS.items():
            if key in SWEEP_LAYER:
                continue
            if cli.get(dest) is not None:
                raw[key] = (cli[dest], f"--{key.replace('_', '-')}", invocation_dir)
            elif key in CLI_ONLY and key in table:
                raise UserError(
                    where=f"[tool.castguard] {key}",
                    problem="can only be given on the command line",
                    fix=f"remove it from pyproject.toml and pass --{key.replace('_', '-')} when needed",
                )
            elif key in table:
                raw[key] = (table[key], f"[tool.castguard] {key}", rootdir)
        kwargs: dict[str, Any] = {}
        for key, (value, where, base) in raw.items():
            kwargs.update(_convert(key, value, where=where, base=base))
        if cli.get("castguard_xfail") is not None and "xfail" in table:  # both: the table's and the options'
            kwargs["xfail"] = _convert("xfail", table["xfail"], where="[tool.castguard] xfail", base=rootdir)["xfail"]
            kwargs["xfail"] += parse_patterns(cli["castguard_xfail"], where="--xfail")
        kwargs.setdefault("goldens_dir", rootdir / "goldens")
        kwargs.setdefault("report_dir", rootdir / "castguard-report")
        kwargs.setdefault("cache_dir", rootdir / ".castguard-cache")
        where = f"{rootdir / 'pyproject.toml'} [tool.castguard"
        tolerances = table.get("tolerances", {})
        if not isinstance(tolerances, dict):
            raise UserError(
                where=f"{where}.tolerances]", problem="not a table", fix="write [tool.castguard.tolerances]"
            )
        return cls(
            **kwargs,
            project_dir=rootdir,
            sweep=sweep_spec(cli=cli, table=table, where=where, invocation_dir=invocation_dir),
            tolerances=parse_tolerance_policy(tolerances, where=f"{where}.tolerances]"),
        )


def sweep_spec(*, cli: Mapping[str, Any], table: Mapping[str, Any], where: str, invocation_dir: Path) -> SweepSpec:
    """The sweep: defaults < ``[tool.castguard] runners`` < ``[tool.castguard.sweep]`` < ``--sweep`` < options."""
    sweep_table = table.get("sweep", {})
    layers: list[tuple[str, Mapping[str, object]]] = []
    if "runners" in table:
        if isinstance(sweep_table, Mapping) and "runners" in sweep_table:
            raise UserError(
                where=f"{where}] runners",
                problem="runners are also set in [tool.castguard.sweep]",
                fix="keep one: [tool.castguard.sweep] runners",
            )
        layers.append((f"{where}] runners", {"runners": table["runners"]}))
    if "sweep" in table:
        layers.append((f"{where}.sweep]", sweep_table))
    if cli.get(SWEEP_FILE_DEST) is not None:
        path = (invocation_dir / cli[SWEEP_FILE_DEST]).resolve()
        layers.append((f"--sweep {path}", read_toml(path, what="sweep file")))
    given = {field: cli[dest] for dest, field in SWEEP_DESTS.items() if cli.get(dest) is not None}
    if "exclude_ops" in given:
        given["exclude_ops"] = tuple(given["exclude_ops"])
    if "converters" in given:
        given["converters"] = ",".join(given["converters"])
    runners = cli.get("castguard_runners")
    options = SweepOptions(**given, runners=",".join(runners) if runners is not None else None)
    return build_sweep_spec(tables=layers, options=options)


def _strings(value: Any, *, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise UserError(
        where=where, problem=f"expected a string or a list of strings, got {value!r}", fix='e.g. runners = ["emulate"]'
    )


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
    if key in ("tune", "trt_build_check", "diagnose"):
        if not isinstance(value, bool):
            raise UserError(where=where, problem=f"expected true or false, got {value!r}", fix=f"write {key} = true")
        return {key: value}
    if key == "shard":
        return {"shard": parse_shard(value, where=where)}
    if key == "xfail":
        return {"xfail": parse_patterns(_strings(value, where=where), where=where)}
    if key == "val_ranges":
        return {"val_ranges": tuple(parse_val_range(v) for v in _strings(value, where=where))}
    if key == "input_shapes":
        shapes = tuple(item for v in _strings(value, where=where) for item in parse_input_shapes(v))
        names = [name for name, _ in shapes]
        if len(set(names)) != len(names):
            raise UserError(where=where, problem="an input's shape is given twice", fix="give each input once")
        return {"input_shapes": shapes}
    if key == "inputs":
        return _inputs(_strings(value, where=where), where=where, base=base)
    if key == "candidates":
        return {"candidates": _candidates(value, where=where, base=base)}
    if key == "ort_providers":
        names = [n.strip() for v in _strings(value, where=where) for n in v.split(",") if n.strip()]
        return {"ort_providers": tuple(names)}
    if key == "runner_options":
        return {"runner_options": parse_runner_options(value, where=where)}
    if key == "runner_timeout":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise UserError(
                where=where, problem=f"expected seconds > 0, got {value!r}", fix="e.g. runner_timeout = 600"
            )
        return {"runner_timeout": float(value)}
    return {key: _int(value, where=where)}


def _candidates(value: Any, *, where: str, base: Path) -> tuple[tuple[str, Path], ...]:
    """``KEY=FILE`` strings (command line) or a ``{KEY = FILE}`` table (pyproject): one file per model key."""
    pairs = (
        list(value.items())
        if isinstance(value, Mapping)
        else [v.partition("=")[::2] for v in _strings(value, where=where)]
    )
    found: dict[str, Path] = {}
    for key, file in pairs:
        if not key or not isinstance(file, str) or not file:
            raise UserError(
                where=where, problem=f"{key!r}={file!r} is not KEY=FILE", fix="e.g. --candidate bert=bert.fp16.onnx"
            )
        if key in found:
            raise UserError(where=where, problem=f"model {key!r} has two candidates", fix="give one per model key")
        found[key] = (base / file).resolve()
    return tuple(sorted(found.items()))


def _inputs(values: Sequence[str], *, where: str, base: Path) -> dict[str, Any]:
    """``--inputs FILE`` (every model) and ``--inputs KEY=FILE`` (that model): a value that names an existing
    file is a file, even with a ``=`` in its name."""
    plain: list[Path] = []
    keyed: dict[str, Path] = {}
    for value in values:
        key, sep, file = value.partition("=")
        if sep and key and file and not (base / value).exists():
            if key in keyed:
                raise UserError(
                    where=where,
                    problem=f"model {key!r} is given two inputs files",
                    fix=f"give --inputs {key}=FILE once",
                )
            keyed[key] = (base / file).resolve()
        else:
            plain.append((base / value).resolve())
    if len(plain) > 1:
        raise UserError(
            where=where,
            problem=f"{len(plain)} inputs files for every model: " + ", ".join(str(p) for p in plain),
            fix="give one --inputs FILE, and --inputs KEY=FILE for the models that need their own",
        )
    return {"inputs_file": plain[0] if plain else None, "model_inputs": tuple(sorted(keyed.items()))}


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
