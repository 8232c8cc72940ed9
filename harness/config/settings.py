"""The :class:`HarnessConfig` dataclass and its merge of the command line over ``[tool.castguard]`` (see
:mod:`harness.config`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config.values import convert_value
from harness.core.errors import UserError
from harness.core.files import read_toml
from harness.core.providers import CPU as CPU_PROVIDER
from harness.judge.tolerances import TolerancePolicy, parse_tolerance_policy
from harness.options import DESTS, SWEEP_DESTS, SWEEP_FILE_DEST
from harness.runners.options import RunnerOptionsTable
from harness.runners.registry import BUILTIN, check_clash
from harness.sweep import SweepOptions, SweepSpec, build_sweep_spec
from harness.sweep.checks import check_runner
from harness.sweep.expected import parse_patterns
from harness.sweep.shards import Shard

CLI_ONLY = frozenset({"models", "update_goldens"})
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
            kwargs.update(convert_value(key, value, where=where, base=base))
        if cli.get("castguard_xfail") is not None and "xfail" in table:  # both: the table's and the options'
            kwargs["xfail"] = convert_value("xfail", table["xfail"], where="[tool.castguard] xfail", base=rootdir)[
                "xfail"
            ]
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
