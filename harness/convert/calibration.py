"""Reference data for the magnitude run: random feeds, or calibration data from files.

Both come from the one home of input feeds, :mod:`harness.data.feeds` and :mod:`harness.data.recipes`, with the
same rules as a golden's inputs: random feeds follow :func:`harness.data.recipes.plan_inputs` (dynamic dims from
``input_shapes``, Gather indices within their table, nothing silently 1); calibration data may be an ``.npz``, a
folder of ``.npz`` (sorted by name), a Polygraphy ``--save-inputs`` JSON or a mapping of arrays. An array whose
leading dim is a multiple of the model's static batch is split into that many batches, like AutoCast; float
arrays are cast to the input's float type. Nothing is ever unpickled.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from harness.data.feeds import Feed, cast_feeds, input_specs, load_feed_file, split_batches, validate_feeds
from harness.data.recipes import InputRecipe, make_feeds, recipe_lines

__all__ = ["Feed", "load_calibration", "random_feeds"]


def random_feeds(model: onnx.ModelProto, *, seed: int,
                 input_shapes: Mapping[str, Sequence[int]] | None) -> tuple[list[Feed], str]:
    """One seeded random feed and its description (the input plan, as the report states it)."""
    recipe = InputRecipe(seed=seed, input_shapes=tuple((name, tuple(int(d) for d in dims))
                                                       for name, dims in (input_shapes or {}).items()))
    feeds = make_feeds(model, recipe, where="the model (random reference data)")
    return feeds, "random: " + "; ".join(recipe_lines(model, recipe))


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
