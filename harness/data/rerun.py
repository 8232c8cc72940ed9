"""The ``pytest`` command that selects a model with its input recipe again (:func:`rerun_command`, printed by
every message that asks for a rerun), and the warning before a large golden is written, which prints the command for
a smaller one (:func:`large_golden_warning`)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness.data.models import ModelSpec
from harness.data.recipes import InputRecipe

LARGE_GOLDEN_BYTES = 100_000_000


def rerun_command(spec: ModelSpec, recipe: InputRecipe, *flags: str, input_options: bool = True) -> str:
    """The ``pytest`` command that selects this model with this input recipe again, from the same folder: the
    model by a ``--model`` value that keeps its key, and the recipe's seed, iterations, ranges, shapes or file
    (``input_options=False``: a bundled model's own inputs, which ``--model NAME`` brings along)."""
    words = ["pytest", "--model", spec.rerun_ref]
    if recipe.inputs_file is not None:
        words += ["--inputs", str(recipe.inputs_file)] if input_options else []
    else:
        for name, lo, hi in recipe.val_ranges if input_options else ():
            words += ["--val-range", f"{name}:[{lo:g},{hi:g}]" if name else f"[{lo:g},{hi:g}]"]
        if recipe.input_shapes:
            words += ["--input-shapes", ",".join(f"{n}:{'x'.join(map(str, s))}" for n, s in recipe.input_shapes)]
        words += ["--seed", str(recipe.seed)] if recipe.seed else []
        words += ["--iterations", str(recipe.iterations)] if recipe.iterations != 1 else []
    return shlex.join([*words, *flags])


def large_golden_warning(
    path: Path, arrays: Mapping[str, np.ndarray], *, spec: ModelSpec, recipe: InputRecipe
) -> str | None:
    """What to say before writing a golden above :data:`LARGE_GOLDEN_BYTES`: its size, its largest arrays, and the
    options that store less (smaller shapes, one iteration), as a command; None below the limit."""
    total = sum(int(a.nbytes) for a in arrays.values())
    if total <= LARGE_GOLDEN_BYTES:
        return None
    largest = sorted(arrays.items(), key=lambda item: -item[1].nbytes)[:3]
    shown = ", ".join(f"{key} {'x'.join(map(str, a.shape))} {a.dtype} ({a.nbytes / 1e6:.0f} MB)" for key, a in largest)
    halved = tuple(
        (name, tuple(max(1, d // 2) if i < 2 else d for i, d in enumerate(dims))) for name, dims in recipe.input_shapes
    )
    smaller = rerun_command(spec, replace(recipe, input_shapes=halved, iterations=1)) if halved else ""
    return (
        f"{path.name}: this golden is {total / 1e6:.0f} MB ({shown}); it is written to disk and read back by every "
        "run. A smaller golden: smaller --input-shapes (fewer tokens or a smaller batch; the golden grows with "
        f"both) and --iterations 1" + (f", e.g. {smaller}" if smaller else "")
    )
