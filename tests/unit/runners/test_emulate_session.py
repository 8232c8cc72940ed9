"""The emulate runner's lighter session (idle threads sleep instead of spinning) computes bit-identical outputs."""

from __future__ import annotations

import numpy as np
import pytest

import test_models
from harness.convert import ConvertOptions, convert
from harness.data.feeds import cast_feeds, input_specs
from harness.data.models import bundled_models_dir
from harness.data.onnxfile import load_model
from harness.data.recipes import InputRecipe, make_feeds, plan_recipe, recipe_for_file
from harness.runners import make_runner
from harness.runners.emulate import EmulateRunner, emulation_model
from harness.runners.ort import CPU, create_session, run_session


def _spinning(session: object) -> str | None:
    """The session's allow_spinning entry (None: not set, ORT's default: spin)."""
    try:
        return str(
            session.get_session_options().get_session_config_entry(  # type: ignore[attr-defined]
                "session.intra_op.allow_spinning"
            )
        )
    except RuntimeError:
        return None


@pytest.mark.parametrize("name", ["bert_tiny", "transformer_block", "llama_tiny"])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_the_emulate_session_matches_a_default_session_bit_for_bit(name: str, precision: str) -> None:
    path = bundled_models_dir() / name / f"{name}.onnx"
    model = load_model(path, weights="lazy")
    inputs = test_models.default_inputs(name)
    ranges = tuple((n, lo, hi) for n, (lo, hi) in sorted(test_models.default_val_ranges(name).items()))
    recipe = recipe_for_file(inputs, seed=0) if inputs else InputRecipe(val_ranges=ranges, iterations=2)
    feeds = make_feeds(model, plan_recipe(model, recipe, where=name), where=name)
    converted = convert(
        model,
        options=ConvertOptions(low_precision_type="fp16" if precision == "fp16" else "bf16", data_max=float("inf")),
        magnitudes=None,
        base_dir=path.parent,
    )
    feeds = cast_feeds(feeds, input_specs(converted.model))
    runner = make_runner("emulate", converted.model, model_dir=path.parent)
    assert isinstance(runner, EmulateRunner)
    with runner:
        assert _spinning(runner._session) == "0"
        light = [runner.infer(feed) for feed in feeds]
    default = create_session(
        emulation_model(converted.model), providers=(CPU,), runner="default", model_dir=path.parent
    )
    assert _spinning(default) is None
    wide = [
        {k: v.astype(np.float32) if v.dtype.kind == "f" or v.dtype.name == "bfloat16" else v for k, v in feed.items()}
        for feed in feeds
    ]
    for got, feed in zip(light, wide):
        expected = run_session(default, feed, runner="default")
        assert got.keys() == expected.keys()
        for key in got:
            assert np.array_equal(np.asarray(got[key], dtype=np.float32), expected[key], equal_nan=True), key
