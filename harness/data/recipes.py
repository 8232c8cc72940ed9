"""Model inputs: the recipe (seed, ranges, shapes or a file), option parsing and feed generation.

* Random inputs are seeded; floats are uniform in the val-range (default [-1, 1], like Polygraphy), bools are
  fair coin flips. An integer input that indexes a ``Gather`` table (token ids, positions) is drawn from
  ``[0, rows)`` of the smallest table it indexes; a shape-like integer input (a Reshape shape, axes, split,
  sizes...) is refused unless ``--val-range`` or ``--inputs`` gives it; any other integer input is drawn from
  ``[0, 1]`` and the plan says castguard could not tell what it holds. A val-range always wins.
* Dynamic dimensions: :mod:`harness.data.shapes` (``--input-shapes``; a stated batch default of 1; any other
  dynamic dim refused by name, or sized with the recipe's ``dynamic_default`` where castguard convert sets
  one). What was chosen, and why, is :func:`recipe_lines` (terminal summary, every case's notes in the report,
  the golden's sidecar).
* ``--inputs FILE`` takes an ``.npz`` (never unpickled) or a Polygraphy ``--save-inputs`` JSON list of feeds.
  An ``.npz`` whose arrays have a leading dimension that is a multiple of the model's static batch is split
  into that many feeds (as AutoCast does).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.core.errors import InputDataError, UserError
from harness.core.files import sha256_file
from harness.data.feedfiles import load_feed_file
from harness.data.feeds import Feed, InputSpec, input_specs, spec_dtype, split_batches, validate_feeds
from harness.data.flagnames import PYTEST_FLAGS, InputFlags
from harness.data.roles import input_roles
from harness.data.shapes import parse_input_shape, parse_input_shapes, resolve_shapes
from harness.data.sizing import BATCH_DEFAULT
from harness.data.valueplan import InputPlan, draw, parse_val_range, range_for, value_plan

__all__ = [
    "BATCH_DEFAULT",
    "Feed",
    "InputPlan",
    "InputRecipe",
    "InputSpec",
    "describe_inputs",
    "generate_feeds",
    "input_specs",
    "load_feed_file",
    "make_feeds",
    "parse_input_shape",
    "parse_input_shapes",
    "parse_val_range",
    "plan_inputs",
    "plan_recipe",
    "range_for",
    "recipe_for_file",
    "recipe_lines",
    "resolve_shapes",
]


@dataclass(frozen=True)
class InputRecipe:
    """Everything that determines the feeds. ``val_ranges`` entries with name ``""`` apply to all inputs."""

    seed: int = 0
    iterations: int = 1
    val_ranges: tuple[tuple[str, float, float], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    inputs_file: Path | None = None
    inputs_sha256: str | None = None
    derived: tuple[tuple[str, str], ...] = ()  # what the model's graph decided (plan_recipe); part of the id
    dynamic_default: int | None = None
    """Size of dynamic non-batch dims nobody gave (castguard convert's reference data); None: refuse them."""
    flags: InputFlags = field(default=PYTEST_FLAGS, compare=False)
    """How the hints spell the input options (pytest's, or castguard convert/tune's): not part of the id."""

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise UserError(
                where="--iterations", problem=f"must be >= 1, got {self.iterations}", fix="pass --iterations 1 or more"
            )
        if (self.inputs_file is None) != (self.inputs_sha256 is None):
            raise ValueError("InputRecipe: inputs_file and inputs_sha256 go together (use recipe_for_file)")
        for name, lo, hi in self.val_ranges:
            if not lo <= hi:
                raise UserError(
                    where="--val-range",
                    problem=f"range [{lo}, {hi}] for {name or 'all inputs'!r} has lo > hi",
                    fix="write it as NAME:[lo,hi] with lo <= hi",
                )

    @property
    def id(self) -> str:
        """Stable, readable id used as the golden's file stem."""
        if self.inputs_sha256 is not None:
            return f"file-{self.inputs_sha256[:8]}"
        fields: dict[str, Any] = {
            "val_ranges": [list(v) for v in self.val_ranges],
            "input_shapes": [[n, list(s)] for n, s in self.input_shapes],
        }
        if self.derived:  # absent for models whose inputs castguard always drew the same way: their ids stay
            fields["derived"] = [list(d) for d in self.derived]
        if self.dynamic_default is not None:
            fields["dynamic_default"] = self.dynamic_default
        payload = json.dumps(fields, sort_keys=True)
        return f"seed{self.seed}-it{self.iterations}-{hashlib.sha256(payload.encode()).hexdigest()[:8]}"

    def to_json_dict(self) -> dict[str, Any]:
        """The fields that determine the feeds (for a file: its name and hash; else seed, ranges, shapes)."""
        if self.inputs_file is not None:
            return {"id": self.id, "inputs_file": self.inputs_file.name, "inputs_sha256": self.inputs_sha256}
        return {
            "id": self.id,
            "seed": self.seed,
            "iterations": self.iterations,
            "val_ranges": [list(v) for v in self.val_ranges],
            "input_shapes": {n: list(s) for n, s in self.input_shapes},
            "derived": {k: v for k, v in self.derived},
            **({"dynamic_default": self.dynamic_default} if self.dynamic_default is not None else {}),
        }


def file_sha256(path: Path) -> str:
    """Streamed (harness.core.files): an inputs file is never read whole just to name its recipe."""
    return sha256_file(path)


def recipe_for_file(path: Path, *, seed: int = 0) -> InputRecipe:
    """A recipe that replays the feeds stored in ``path``."""
    if not path.is_file():
        raise InputDataError(where=path, problem="inputs file does not exist", fix="check the --inputs path")
    return InputRecipe(seed=seed, inputs_file=path.resolve(), inputs_sha256=file_sha256(path))


def plan_inputs(model: onnx.ModelProto, recipe: InputRecipe, *, where: str) -> tuple[list[InputPlan], list[str]]:
    """Shape and values of every generated input (the recipe has no file), and the notes on chosen dims."""
    specs = input_specs(model)
    _check_range_names(specs, recipe, where=where)
    sized = resolve_shapes(
        specs, recipe.input_shapes, where=where, dynamic_default=recipe.dynamic_default, iterations=recipe.iterations
    )
    shapes, notes = sized.shapes, list(sized.notes)
    roles = input_roles(model)
    plans = []
    for spec in specs:
        given = range_for(spec.name, recipe.val_ranges)
        lo, hi, how = value_plan(spec, roles.get(spec.name), given, flags=recipe.flags, where=where)
        plans.append(InputPlan(spec.name, str(spec_dtype(spec, where=where)), shapes[spec.name], lo, hi, how))
    return plans, notes


def plan_recipe(model: onnx.ModelProto, recipe: InputRecipe, *, where: str) -> InputRecipe:
    """``recipe`` with what the model's graph decided (dynamic dims' sizes, index ranges) in its id."""
    if recipe.inputs_file is not None:
        return recipe
    plans, _ = plan_inputs(model, recipe, where=where)
    dynamic = {s.name for s in input_specs(model) if s.dims is not None and None in s.dims}
    derived = [(f"shape:{p.name}", "x".join(map(str, p.shape))) for p in plans if p.name in dynamic]
    derived += [(f"ids:{p.name}", f"0..{p.high:g}") for p in plans if p.how.startswith("ids ")]
    return replace(recipe, derived=tuple(derived))


def recipe_lines(model: onnx.ModelProto, recipe: InputRecipe) -> list[str]:
    """What the report and the terminal say about a model's inputs, one line per input or chosen dim."""
    if recipe.inputs_file is not None:
        return [f"from {recipe.inputs_file.name} (sha256 {str(recipe.inputs_sha256)[:12]}...), as stored"]
    plans, notes = plan_inputs(model, recipe, where="model")
    head = f"seed {recipe.seed}, {recipe.iterations} iteration(s)"
    return [head, *(p.line() for p in plans), *notes]


def _check_range_names(specs: Sequence[InputSpec], recipe: InputRecipe, *, where: str) -> None:
    names = [s.name for s in specs]
    for rname, _, _ in recipe.val_ranges:
        if rname and rname not in names:
            raise UserError(
                where="--val-range",
                problem=f"{where} has no input named {rname!r}",
                fix=f"use one of: {', '.join(names)} (or [lo,hi] without a name for all inputs)",
            )


def generate_feeds(model: onnx.ModelProto, recipe: InputRecipe, *, where: str) -> list[Feed]:
    """Seeded random feeds following :func:`plan_inputs`."""
    plans, _ = plan_inputs(model, recipe, where=where)
    rng = np.random.default_rng(recipe.seed)
    return [{p.name: draw(rng, p, flags=recipe.flags) for p in plans} for _ in range(recipe.iterations)]


def make_feeds(model: onnx.ModelProto, recipe: InputRecipe, *, where: str) -> list[Feed]:
    """The feeds for ``model``: loaded from the recipe's file (validated) or generated from its seed."""
    if recipe.inputs_file is None:
        return generate_feeds(model, recipe, where=where)
    specs = input_specs(model)
    if recipe.val_ranges or recipe.input_shapes:
        raise UserError(
            where="--inputs",
            problem="--val-range/--input-shapes cannot be combined with --inputs",
            fix="drop one: the inputs file already fixes values and shapes",
        )
    if file_sha256(recipe.inputs_file) != recipe.inputs_sha256:
        raise InputDataError(
            where=recipe.inputs_file,
            problem="file changed since the recipe was made",
            fix="rerun so the recipe hashes the current file",
        )
    raw = load_feed_file(recipe.inputs_file)
    feeds = split_batches(raw, specs) if recipe.inputs_file.suffix == ".npz" else raw
    return validate_feeds(feeds, specs, where=str(recipe.inputs_file))


def describe_inputs(model: onnx.ModelProto, recipe: InputRecipe, feeds: Sequence[Feed]) -> dict[str, Any]:
    """The recipe plus what was actually used: shapes, dtypes, and the plan's lines (how each input was made)."""
    return {
        **recipe.to_json_dict(),
        "feeds": len(feeds),
        "shapes": {n: list(a.shape) for n, a in feeds[0].items()} if feeds else {},
        "dtypes": {n: str(a.dtype) for n, a in feeds[0].items()} if feeds else {},
        "plan": recipe_lines(model, recipe),
    }
