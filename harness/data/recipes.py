"""Model inputs: the recipe (seed, ranges, shapes or a file), option parsing and feed generation.

* Random inputs are seeded; floats are uniform in the val-range (default [-1, 1], like Polygraphy), integers
  are uniform in the val-range rounded inwards (default [0, 1]), bools are fair coin flips.
* Dynamic dimensions come from ``--input-shapes``; otherwise they are 1 and :func:`describe_inputs` says so.
* ``--inputs FILE`` takes an ``.npz`` (never unpickled) or a Polygraphy ``--save-inputs`` JSON list of feeds.
  An ``.npz`` whose arrays have a leading dimension that is a multiple of the model's static batch is split
  into that many feeds (as AutoCast does).
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.dtypes import BFLOAT16
from harness.errors import InputDataError, UserError
from harness.data.feeds import (Feed, InputSpec, fmt_dims, input_specs, load_feed_file, spec_dtype,
                                 split_batches, validate_feeds)

__all__ = ["Feed", "InputRecipe", "InputSpec", "describe_inputs", "generate_feeds", "input_specs",
           "load_feed_file", "make_feeds", "parse_input_shape", "parse_val_range", "recipe_for_file",
           "resolve_shapes"]

_RANGE_RE = re.compile(r"^(?:(?P<name>.*):)?\[(?P<lo>[^,\[\]]+),(?P<hi>[^,\[\]]+)\]$")
_SHAPE_RE = re.compile(r"^(?P<name>.+):(?P<dims>\[[\d,\s]*\]|\d+(?:x\d+)*)$")
_DEFAULT_FLOAT_RANGE = (-1.0, 1.0)
_DEFAULT_INT_RANGE = (0.0, 1.0)


@dataclass(frozen=True)
class InputRecipe:
    """Everything that determines the feeds. ``val_ranges`` entries with name ``""`` apply to all inputs."""

    seed: int = 0
    iterations: int = 1
    val_ranges: tuple[tuple[str, float, float], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    inputs_file: Path | None = None
    inputs_sha256: str | None = None

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise UserError(where="--iterations", problem=f"must be >= 1, got {self.iterations}",
                            fix="pass --iterations 1 or more")
        if (self.inputs_file is None) != (self.inputs_sha256 is None):
            raise ValueError("InputRecipe: inputs_file and inputs_sha256 go together (use recipe_for_file)")
        for name, lo, hi in self.val_ranges:
            if not lo <= hi:
                raise UserError(where="--val-range", problem=f"range [{lo}, {hi}] for {name or 'all inputs'!r} "
                                "has lo > hi", fix="write it as NAME:[lo,hi] with lo <= hi")

    @property
    def id(self) -> str:
        """Stable, readable id used as the golden's file stem."""
        if self.inputs_sha256 is not None:
            return f"file-{self.inputs_sha256[:8]}"
        payload = json.dumps({"val_ranges": [list(v) for v in self.val_ranges],
                              "input_shapes": [[n, list(s)] for n, s in self.input_shapes]}, sort_keys=True)
        return f"seed{self.seed}-it{self.iterations}-{hashlib.sha256(payload.encode()).hexdigest()[:8]}"

    def to_json_dict(self) -> dict[str, Any]:
        """The fields that determine the feeds (for a file: its name and hash; else seed, ranges, shapes)."""
        if self.inputs_file is not None:
            return {"id": self.id, "inputs_file": self.inputs_file.name, "inputs_sha256": self.inputs_sha256}
        return {"id": self.id, "seed": self.seed, "iterations": self.iterations,
                "val_ranges": [list(v) for v in self.val_ranges],
                "input_shapes": {n: list(s) for n, s in self.input_shapes}}


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recipe_for_file(path: Path, *, seed: int = 0) -> InputRecipe:
    """A recipe that replays the feeds stored in ``path``."""
    if not path.is_file():
        raise InputDataError(where=path, problem="inputs file does not exist", fix="check the --inputs path")
    return InputRecipe(seed=seed, inputs_file=path.resolve(), inputs_sha256=file_sha256(path))


def parse_val_range(text: str) -> tuple[str, float, float]:
    """``NAME:[lo,hi]`` or ``[lo,hi]`` (all inputs) -> (name, lo, hi)."""
    match = _RANGE_RE.match(text.replace(" ", ""))
    fix = "use Polygraphy syntax: --val-range x:[1,2] (one input) or --val-range [0,1] (all inputs)"
    if not match:
        raise UserError(where="--val-range", problem=f"cannot parse {text!r}", fix=fix)
    try:
        lo, hi = float(match["lo"]), float(match["hi"])
    except ValueError:
        raise UserError(where="--val-range", problem=f"bounds in {text!r} are not numbers", fix=fix) from None
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise UserError(where="--val-range", problem=f"{text!r} is not an interval with lo <= hi", fix=fix)
    return match["name"] or "", lo, hi


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:1x3x224x224`` or ``NAME:[1,3,224,224]`` -> (name, dims)."""
    match = _SHAPE_RE.match(text.strip())
    if not match:
        raise UserError(where="--input-shapes", problem=f"cannot parse {text!r}",
                        fix="write NAME:1x3x224x224 (or NAME:[1,3,224,224])")
    raw = match["dims"].strip("[]")
    parts = [p for p in re.split(r"[x,\s]+", raw) if p]
    return match["name"], tuple(int(p) for p in parts)


def resolve_shapes(specs: Sequence[InputSpec], recipe: InputRecipe, *, where: str) -> dict[str, tuple[int, ...]]:
    """Concrete shape per input: declared static dims, ``--input-shapes`` for dynamic ones, else 1."""
    names = [s.name for s in specs]
    given = dict(recipe.input_shapes)
    for name in given:
        if name not in names:
            raise UserError(where="--input-shapes", problem=f"{where} has no input named {name!r}",
                            fix=f"use one of: {', '.join(names)}")
    shapes = {}
    for spec in specs:
        if spec.name in given:
            shape = given[spec.name]
            if spec.dims is not None and (len(shape) != len(spec.dims) or any(
                    d is not None and d != s for d, s in zip(spec.dims, shape))):
                raise UserError(where="--input-shapes", problem=f"{spec.name}:{list(shape)} does not fit the "
                                f"declared shape {fmt_dims(spec.dims)} of {where}",
                                fix="keep the rank and the static dimensions; set only the dynamic ones")
            shapes[spec.name] = shape
        elif spec.dims is None:
            raise UserError(where=where, problem=f"input {spec.name!r} has no declared shape",
                            fix=f"pass --input-shapes {spec.name}:1x3x224x224 (the real shape)")
        else:
            shapes[spec.name] = tuple(1 if d is None else d for d in spec.dims)
    return shapes


def _range_for(name: str, dtype: np.dtype, recipe: InputRecipe) -> tuple[float, float]:
    """The last range named for this input, else the last unnamed one, else the default for the dtype."""
    named = [(lo, hi) for rname, lo, hi in recipe.val_ranges if rname == name]
    unnamed = [(lo, hi) for rname, lo, hi in recipe.val_ranges if rname == ""]
    if named or unnamed:
        return (named or unnamed)[-1]
    return _DEFAULT_INT_RANGE if dtype.kind in "iu" else _DEFAULT_FLOAT_RANGE


def _draw(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], lo: float, hi: float,
          *, name: str) -> np.ndarray:
    if dtype == np.dtype(np.bool_):
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo_i, hi_i = max(math.ceil(lo), info.min), min(math.floor(hi), info.max)
        if lo_i > hi_i:
            raise UserError(where="--val-range", problem=f"[{lo}, {hi}] holds no {dtype} value for {name!r}",
                            fix=f"give {name} a range that contains integers valid for {dtype}")
        return rng.integers(lo_i, hi_i, size=shape, endpoint=True).astype(dtype)
    if dtype.kind == "f" or dtype == BFLOAT16:
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    raise UserError(where=name, problem=f"castguard cannot generate random {dtype} inputs",
                    fix="pass the inputs with --inputs FILE.npz")


def _check_range_names(specs: Sequence[InputSpec], recipe: InputRecipe, *, where: str) -> None:
    names = [s.name for s in specs]
    for rname, _, _ in recipe.val_ranges:
        if rname and rname not in names:
            raise UserError(where="--val-range", problem=f"{where} has no input named {rname!r}",
                            fix=f"use one of: {', '.join(names)} (or [lo,hi] without a name for all inputs)")


def generate_feeds(specs: Sequence[InputSpec], recipe: InputRecipe, *, where: str) -> list[Feed]:
    _check_range_names(specs, recipe, where=where)
    shapes = resolve_shapes(specs, recipe, where=where)
    rng = np.random.default_rng(recipe.seed)
    feeds = []
    for _ in range(recipe.iterations):
        feed = {}
        for spec in specs:
            dtype = spec_dtype(spec, where=where)
            lo, hi = _range_for(spec.name, dtype, recipe)
            feed[spec.name] = _draw(rng, dtype, shapes[spec.name], lo, hi, name=spec.name)
        feeds.append(feed)
    return feeds


def make_feeds(model: onnx.ModelProto, recipe: InputRecipe, *, where: str) -> list[Feed]:
    """The feeds for ``model``: loaded from the recipe's file (validated) or generated from its seed."""
    specs = input_specs(model)
    if recipe.inputs_file is None:
        return generate_feeds(specs, recipe, where=where)
    if recipe.val_ranges or recipe.input_shapes:
        raise UserError(where="--inputs", problem="--val-range/--input-shapes cannot be combined with --inputs",
                        fix="drop one: the inputs file already fixes values and shapes")
    if file_sha256(recipe.inputs_file) != recipe.inputs_sha256:
        raise InputDataError(where=recipe.inputs_file, problem="file changed since the recipe was made",
                             fix="rerun so the recipe hashes the current file")
    raw = load_feed_file(recipe.inputs_file)
    feeds = split_batches(raw, specs) if recipe.inputs_file.suffix == ".npz" else raw
    return validate_feeds(feeds, specs, where=str(recipe.inputs_file))


def describe_inputs(model: onnx.ModelProto, recipe: InputRecipe, feeds: Sequence[Feed]) -> dict[str, Any]:
    """The recipe plus what was actually used: shapes, dtypes, and which dims defaulted to 1."""
    specs = input_specs(model)
    defaulted = {s.name: [i for i, d in enumerate(s.dims or ()) if d is None]
                 for s in specs if recipe.inputs_file is None and s.name not in dict(recipe.input_shapes)}
    return {**recipe.to_json_dict(), "feeds": len(feeds),
            "shapes": {n: list(a.shape) for n, a in feeds[0].items()} if feeds else {},
            "dtypes": {n: str(a.dtype) for n, a in feeds[0].items()} if feeds else {},
            "dynamic_dims_defaulted_to_1": {n: d for n, d in defaulted.items() if d}}
