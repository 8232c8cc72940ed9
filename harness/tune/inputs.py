"""The tuning inputs (:mod:`harness.tune.engine` step 1): the calibration data, else seeded random feeds, with
dynamic dims the user did not size refused; and the plan's record of which inputs the plan was tuned on."""

from __future__ import annotations

from pathlib import Path

import onnx

from harness.convert import ReferenceData
from harness.convert.calibration import WHERE, load_calibration, sized_inputs
from harness.data.feeds import Feed
from harness.data.flagnames import CONVERT_FLAGS
from harness.data.recipes import InputRecipe, make_feeds, recipe_lines
from harness.data.shapes import UnsizedDims
from harness.tune.oracle import Setup
from harness.tune.rounds import Rounds


def load_feeds(model: onnx.ModelProto, reference: ReferenceData, *, random_inputs: int = 1) -> tuple[list[Feed], str]:
    """The tuning inputs and what they are: the calibration data, else ``random_inputs`` seeded random feeds (the
    first is the one ``collect_magnitudes`` runs)."""
    if reference.calibration_data is not None:
        return load_calibration(reference.calibration_data, model)
    shapes = tuple((name, tuple(int(d) for d in dims)) for name, dims in (reference.input_shapes or {}).items())
    recipe = InputRecipe(seed=reference.seed, iterations=random_inputs, input_shapes=shapes, flags=CONVERT_FLAGS)
    return (
        make_feeds(model, recipe, where=WHERE),
        f"random: {random_inputs} input(s), seed {reference.seed}; " + "; ".join(recipe_lines(model, recipe)),
    )


def refuse_unsized(model: onnx.ModelProto, reference: ReferenceData, *, where: Path) -> None:
    """tune sizes no dynamic dim beyond the batch: its bound is a claim about the inputs it was checked on."""
    if reference.calibration_data is not None:
        return
    try:
        sized_inputs(model, input_shapes=reference.input_shapes, dynamic_default=None)
    except UnsizedDims as err:
        raise UnsizedDims(
            where=where,
            problem=f"{err.problem}. tune does not guess them, "
            "because the error bound it checks is a claim about the sizes you deploy with "
            "(castguard convert, which makes no such claim, sizes them with a default and a warning)",
            fix=err.fix.replace("--input-shapes", "--input_shapes") + "; or give --calibration_data",
        ) from None


def inputs_json(setup: Setup, done: Rounds, inputs_source: str, reference: ReferenceData | None) -> dict[str, object]:
    """Which inputs the plan was tuned on: the tuning data (its source: the calibration file, or the seed of the
    random feeds) and every counterexample the hunt added, value by value when small."""
    source: dict[str, object] = {}
    if reference is not None:
        source = (
            {"calibration_data": str(reference.calibration_data)}
            if reference.calibration_data is not None
            else {"random_seed": reference.seed}
        )
    return {
        "tuning": len(setup.feeds),
        **source,
        "data": setup.magnitudes.data_source,
        "feeds": inputs_source,
        "counterexamples": [c.to_json() for c in done.counterexamples],
        "total": len(done.setup.feeds),
        "stopped": done.stopped or None,
    }
