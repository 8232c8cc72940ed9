"""Reference data for the magnitude run: random feeds, or calibration data from files.

Both come from the one home of input feeds, :mod:`harness.data.feeds` and :mod:`harness.data.recipes`, with the
same rules as a golden's inputs: random feeds follow :func:`harness.data.recipes.plan_inputs` (dynamic dims from
``input_shapes``, Gather indices within their table), except that the converter sizes dynamic dims nobody gave
(:data:`~harness.data.sizing.DYNAMIC_DEFAULT`; the batch 1) and says so in one warning
(:func:`dynamic_dims_warning`) where the harness refuses them; calibration data may be an ``.npz``, a
folder of ``.npz`` (sorted by name), a Polygraphy ``--save-inputs`` JSON or a mapping of arrays. An array whose
leading dim is a multiple of the model's static batch is split into that many batches, like AutoCast; float
arrays are cast to the input's float type. Nothing is ever unpickled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from harness.data.feedfiles import load_feed_file
from harness.data.feeds import Feed, cast_feeds, input_specs, split_batches, validate_feeds
from harness.data.flagnames import CONVERT_FLAGS
from harness.data.recipes import InputRecipe, make_feeds, recipe_lines
from harness.data.shapes import resolve_shapes
from harness.data.sizing import BATCH_DEFAULT, DYNAMIC_DEFAULT, ShapePlan

__all__ = ["Feed", "dynamic_dims_warning", "load_calibration", "random_feeds", "sized_inputs"]
WHERE = "the model (random reference data)"


def _given(input_shapes: Mapping[str, Sequence[int]] | None) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((name, tuple(int(d) for d in dims)) for name, dims in (input_shapes or {}).items())


def random_feeds(
    model: onnx.ModelProto,
    *,
    seed: int,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dynamic_default: int | None = None,
) -> tuple[list[Feed], str]:
    """One seeded random feed and its description (the input plan, as the report states it). Dynamic non-batch
    dims nobody gave take `dynamic_default` (the converter's), or are refused (None: the harness, tune)."""
    recipe = InputRecipe(
        seed=seed, input_shapes=_given(input_shapes), dynamic_default=dynamic_default, flags=CONVERT_FLAGS
    )
    feeds = make_feeds(model, recipe, where=WHERE)
    return feeds, "random: " + "; ".join(recipe_lines(model, recipe))


def sized_inputs(
    model: onnx.ModelProto, *, input_shapes: Mapping[str, Sequence[int]] | None, dynamic_default: int | None
) -> ShapePlan:
    """The shapes random reference data gets, and the dims castguard sized (UserError where it will not)."""
    return resolve_shapes(input_specs(model), _given(input_shapes), where=WHERE, dynamic_default=dynamic_default)


def dynamic_dims_warning(plan: ShapePlan, *, dynamic_default: int = DYNAMIC_DEFAULT) -> str | None:
    """One line naming every dynamic dim castguard sized (a batch of 1 included: the user should know what the
    magnitudes were measured on), with the option that gives real sizes; None when nothing was chosen."""
    if not plan.defaulted:
        return None
    per_input: dict[str, list[str]] = {}
    for dim in plan.defaulted:
        per_input.setdefault(dim.input, []).append(f"{dim.label()} = {dim.size}")
    dims = "; ".join(f"{name} {', '.join(items)}" for name, items in per_input.items())
    shapes = {name: plan.shapes[name] for name in per_input}
    flag = ",".join(f"{name}:{'x'.join(map(str, shape))}" for name, shape in shapes.items())
    python = ", ".join(f"{name!r}: {shape}" for name, shape in shapes.items())
    return (
        f"dynamic dims without a size: {dims} (castguard convert's defaults: batch {BATCH_DEFAULT}, other dims "
        f"{dynamic_default}, fewer where an input would be too large; dims sharing a name share a size). The "
        f"reference data feeds the magnitude rules at these sizes; give the sizes you deploy with: --input_shapes "
        f"{flag} (Python: input_shapes={{{python}}}) or calibration data (--calibration_data / calibration_data=)"
    )


def load_calibration(data: str | Path | Mapping[str, np.ndarray], model: onnx.ModelProto) -> tuple[list[Feed], str]:
    """Load and validate calibration data; returns the batches and a description of the source."""
    specs = input_specs(model)
    if isinstance(data, Mapping):
        raw, where, source = [dict(data)], "calibration_data", "calibration:<dict>"
    else:
        path = Path(data)
        raw, where = load_feed_file(path), str(path)
        source = f"calibration:{path}" + (f" ({len(raw)} files)" if path.is_dir() else "")
    batches = split_batches(raw, specs)
    return validate_feeds(cast_feeds(batches, specs), specs, where=where), source
