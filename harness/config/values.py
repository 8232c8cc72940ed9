"""Each ``[tool.castguard]`` key's value, or its command-line option's, checked and converted to the field it sets
(:func:`convert_value`): paths resolved, ranges and shapes parsed, ``--inputs``/``--candidate`` ``KEY=FILE`` split."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.core.errors import UserError
from harness.data.recipes import parse_input_shapes, parse_val_range
from harness.runners.options import parse_runner_options
from harness.sweep.expected import parse_patterns
from harness.sweep.shards import parse_shard


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


def convert_value(key: str, value: Any, *, where: str, base: Path) -> dict[str, Any]:
    """One ``[tool.castguard]`` key's value (or its option's: ``where`` says which) checked and converted to the
    :class:`~harness.config.settings.HarnessConfig` field(s) it sets; paths are relative to ``base``."""
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
