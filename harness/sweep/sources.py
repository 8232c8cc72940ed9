"""Build a :class:`SweepSpec` from its sources, later ones winning key by key::

    SweepSpec() defaults < pyproject [tool.castguard.sweep] < --sweep FILE < command-line options

Documented default table (exactly what ``SweepSpec()`` holds; 2 x 3 x 1 x 2 x 1 x 1 = 12 cases)::

    [tool.castguard.sweep]
    precisions = ["fp16", "bf16"]
    data_max = [8, 512, inf]            # tight, AutoCast's default, off (inf or "inf" disables the rule)
    init_max = [65504]
    exclusions = ["none", "sensitive"]  # names of the exclusion sets to sweep
    keep_io_types = [false]             # or "both", true, false
    runners = ["emulate"]
    node_precisions = {}                # e.g. { Add = "fp16", Sub = "fp32" }: node name or op type
    fp32_accumulation = false
    target = "any"                      # any | ort-cuda | tensorrt (convert --target), for every case
    fp32_casts = ["respect"]            # or ["respect", "ignore"]: the model's own FP32 Casts (exporters')

    [tool.castguard.sweep.exclusion_sets]   # user sets; "none" and "sensitive" are built in
    attention = ["Softmax", "MatMul"]

Why data_max 8: a sweep should show a trade-off. Small CNNs such as the bundled mnist (activations up
to about 21) convert identically under AutoCast's 512 and under inf; a tight threshold keeps their
large-activation layers FP32 (mnist: 21% low-precision FLOPs instead of 100%) and gives the plot a
second point. Why not keep_io_types by default: it only decides whether the model's own inputs and outputs are
fp16 at the boundary; the values inside are rounded the same way either way, so on the bundled models the
24-case grid with it gave 6 (mnist), 10 (transformer_block) and 3 (needs_constraints) distinct results, and the
12 cases without it give 4, 6 and 3. Sweep it (``--keep-io-types both``) when the deployment feeds fp16. Cases
that still convert to the same graph run once (:mod:`harness.pipeline.dedup`). A ``--sweep FILE``
holds the same keys at its top level. Every bad value raises a
:class:`~harness.core.errors.UserError` naming the file and key (or the option), the problem and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.core.errors import UserError, unknown_key
from harness.core.files import read_toml
from harness.sweep.checks import check_choice
from harness.sweep.exclusions import BUILTIN_EXCLUSIONS, ExclusionSet
from harness.sweep.grid import TARGETS, SweepSpec
from harness.sweep.values import (
    converter_options,
    keep_io,
    limit,
    listed,
    node_precision_table,
    parse_node_precisions,
    split,
    strings,
)


@dataclass(frozen=True)
class SweepOptions:
    """The command-line sweep options as typed by the user; None means "not given"."""

    precision: str | None = None  # --precision fp16,bf16
    data_max: str | None = None  # --data-max 64,512,inf
    init_max: str | None = None  # --init-max 65504
    exclude_ops: tuple[str, ...] = ()  # --exclude-ops none --exclude-ops attn=Softmax+MatMul (or comma-joined)
    keep_io_types: str | None = None  # --keep-io-types both|true|false
    runners: str | None = None  # --runner emulate,reference
    node_precisions: str | None = None  # --node-precisions Add:fp16,Sub:fp32
    fp32_accumulation: bool | None = None  # --fp32-accumulation
    target: str | None = None  # --target ort-cuda
    converters: str | None = None  # --converter castguard --converter ort-fp16 (comma-joined)
    fp32_casts: str | None = None  # --fp32-casts respect,ignore


TABLE_KEYS = (
    "precisions",
    "data_max",
    "init_max",
    "exclusions",
    "exclusion_sets",
    "keep_io_types",
    "runners",
    "node_precisions",
    "fp32_accumulation",
    "target",
    "converters",
    "converter_options",
    "fp32_casts",
)


def build_sweep_spec(
    *, tables: Sequence[tuple[str, Mapping[str, object]]] = (), options: SweepOptions = SweepOptions()
) -> SweepSpec:
    """Apply TOML sweep tables (``(where, table)``, lowest precedence first), then the command-line options."""
    spec, known = SweepSpec(), {s.name: s for s in BUILTIN_EXCLUSIONS}
    for where, table in tables:
        spec, known = _apply_table(spec, known, table, where=where)
    return _apply_options(spec, known, options)


def load_sweep_spec(
    *, pyproject: Path | None = None, sweep_file: Path | None = None, options: SweepOptions = SweepOptions()
) -> SweepSpec:
    """Read ``[tool.castguard.sweep]`` from ``pyproject`` and the ``--sweep`` file, then apply the options."""
    tables: list[tuple[str, Mapping[str, object]]] = []
    if pyproject is not None:
        table: object = read_toml(pyproject, what="pyproject")
        for key in ("tool", "castguard", "sweep"):
            table = table.get(key) if isinstance(table, Mapping) else None
        if table is not None:
            tables.append((f"{pyproject} [tool.castguard.sweep]", table))  # type: ignore[arg-type]
    if sweep_file is not None:
        tables.append((f"--sweep {sweep_file}", read_toml(sweep_file, what="sweep file")))
    return build_sweep_spec(tables=tables, options=options)


def _apply_table(
    spec: SweepSpec, known: dict[str, ExclusionSet], table: Mapping[str, object], *, where: str
) -> tuple[SweepSpec, dict[str, ExclusionSet]]:
    if not isinstance(table, Mapping):
        raise UserError(where=where, problem="the sweep settings are not a TOML table", fix="write key = value lines")
    for key in table:
        if key not in TABLE_KEYS:
            hint = " ([tool.castguard.sweep] belongs in pyproject.toml; a --sweep file has the keys at top level)"
            error = unknown_key(str(key), TABLE_KEYS, where=f"{where} key {key!r}", what="sweep key")
            raise UserError(where=error.where, problem=error.problem + (hint if key == "tool" else ""), fix=error.fix)
    known = dict(known)
    sets = table.get("exclusion_sets", {})
    if not isinstance(sets, Mapping):
        raise UserError(
            where=f"{where} key 'exclusion_sets'",
            problem="not a table",
            fix='write [..exclusion_sets] with lines like attention = ["Softmax", "MatMul"]',
        )
    for name, ops in sets.items():
        known[name] = _define_set(
            name, strings(ops, where=f"{where} exclusion_sets.{name}"), where=f"{where} exclusion_sets.{name}"
        )
    changes: dict[str, Any] = {}  # SweepSpec field -> checked value
    for key in ("precisions", "runners", "converters", "fp32_casts"):
        if key in table:
            _set(changes, key, strings(table[key], where=f"{where} key {key!r}"), where=f"{where} key {key!r}")
    for key in ("data_max", "init_max"):
        if key in table:
            _set(
                changes,
                key,
                tuple(limit(v, where=f"{where} key {key!r}") for v in listed(table[key])),
                where=f"{where} key {key!r}",
            )
    if "exclusions" in table:
        here = f"{where} key 'exclusions'"
        _set(changes, "exclusions", _select(strings(table["exclusions"], where=here), known, where=here), where=here)
    if "keep_io_types" in table:
        changes["keep_io_types"] = keep_io(table["keep_io_types"], where=f"{where} key 'keep_io_types'")
    if "converter_options" in table:
        changes["converter_options"] = converter_options(table["converter_options"], where=f"{where} converter_options")
    if "node_precisions" in table:
        changes["node_precisions"] = node_precision_table(
            table["node_precisions"], where=f"{where} key 'node_precisions'"
        )
    if "fp32_accumulation" in table:
        flag = table["fp32_accumulation"]
        if not isinstance(flag, bool):
            raise UserError(
                where=f"{where} key 'fp32_accumulation'",
                problem=f"{flag!r} is not a boolean",
                fix="write true or false",
            )
        changes["fp32_accumulation"] = flag
    if "target" in table:
        check_choice(table["target"], TARGETS, where=f"{where} key 'target'")
        changes["target"] = table["target"]
    return replace(spec, **changes), known


def _apply_options(spec: SweepSpec, known: dict[str, ExclusionSet], options: SweepOptions) -> SweepSpec:
    changes: dict[str, Any] = {}
    if options.precision is not None:
        _set(changes, "precisions", split(options.precision, where="--precision"), where="--precision")
    if options.runners is not None:
        _set(changes, "runners", split(options.runners, where="--runner"), where="--runner")
    if options.converters is not None:
        _set(changes, "converters", split(options.converters, where="--converter"), where="--converter")
    for attr, flag in (("data_max", "--data-max"), ("init_max", "--init-max")):
        text = getattr(options, attr)
        if text is not None:
            _set(changes, attr, tuple(limit(v, where=flag) for v in split(text, where=flag)), where=flag)
    if options.exclude_ops:
        known, names = dict(known), []
        for item in (i for text in options.exclude_ops for i in split(text, where="--exclude-ops")):
            name, eq, ops = item.partition("=")
            if eq:
                known[name] = _define_set(name, tuple(o for o in ops.split("+") if o), where="--exclude-ops")
            names.append(name)
        _set(changes, "exclusions", _select(tuple(names), known, where="--exclude-ops"), where="--exclude-ops")
    if options.keep_io_types is not None:
        changes["keep_io_types"] = keep_io(options.keep_io_types, where="--keep-io-types")
    if options.node_precisions is not None:
        changes["node_precisions"] = parse_node_precisions(options.node_precisions, where="--node-precisions")
    if options.fp32_accumulation is not None:
        changes["fp32_accumulation"] = options.fp32_accumulation
    if options.target is not None:
        check_choice(options.target, TARGETS, where="--target")
        changes["target"] = options.target
    if options.fp32_casts is not None:
        _set(changes, "fp32_casts", split(options.fp32_casts, where="--fp32-casts"), where="--fp32-casts")
    return replace(spec, **changes)


def _set(changes: dict[str, Any], key: str, value: Any, *, where: str) -> None:
    """Record one axis after checking it on its own, so an error names the option or key it came from."""
    try:
        replace(SweepSpec(), **{key: value})
    except UserError as err:
        raise UserError(where=where, problem=err.problem, fix=err.fix) from err
    changes[key] = value


def _define_set(name: str, ops: tuple[str, ...], *, where: str) -> ExclusionSet:
    if name == "none" and ops:
        raise UserError(
            where=where, problem="the set 'none' is built in and must stay empty", fix="give your set another name"
        )
    try:
        return ExclusionSet(name, ops)
    except UserError as err:
        raise UserError(where=f"{where}: {err.where}", problem=err.problem, fix=err.fix) from err


def _select(names: tuple[str, ...], known: Mapping[str, ExclusionSet], *, where: str) -> tuple[ExclusionSet, ...]:
    for name in names:
        if name not in known:
            raise UserError(
                where=where,
                problem=f"no exclusion set named {name!r} (known: {', '.join(sorted(known))})",
                fix="define it, e.g. --exclude-ops NAME=Op1+Op2, or in [tool.castguard.sweep.exclusion_sets]",
            )
    return tuple(known[name] for name in names)
