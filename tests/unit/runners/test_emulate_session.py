"""The emulate runner's lighter session (idle threads sleep instead of spinning) computes bit-identical outputs."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import test_models
from harness.convert import ConvertOptions, convert
from harness.data.feeds import cast_feeds, input_specs
from harness.data.models import bundled_models_dir
from harness.data.onnxfile import load_model
from harness.data.recipes import InputRecipe, make_feeds, plan_recipe, recipe_for_file
from harness.runners import make_runner
from harness.runners.emulate import EmulateRunner, emulation_model
from harness.runners.ort import CPU, create_session, run_session
from tests.helpers.graphs import make_model
from tests.helpers.memory import allocated, needs_mallinfo2


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


@needs_mallinfo2
def test_the_emulation_model_holds_its_widened_weights_only() -> None:
    """An fp16 model with 16 MB of fp16 weights emulates with 32 MB of fp32 ones: the emulation model used to copy
    the fp16 bytes and then replace them, and protobuf kept both (48 MB). Its outputs are unchanged."""
    rows, cols = 2048, 4096
    weight = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float16)
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [("x", TensorProto.FLOAT16, [1, rows])],
        [("y", TensorProto.FLOAT16, [1, cols])],
        initializers=[numpy_helper.from_array(weight, "w")],
    )
    before = allocated()
    emulated = emulation_model(model)
    held = allocated() - before
    assert held < 1.25 * weight.nbytes * 2, f"{held >> 20} MB for {weight.nbytes * 2 >> 20} MB of fp32 weights"
    (widened,) = emulated.graph.initializer
    assert widened.data_type == TensorProto.FLOAT
    assert np.array_equal(numpy_helper.to_array(widened), weight.astype(np.float32))
    x = np.random.default_rng(1).standard_normal((1, rows)).astype(np.float16)
    got = EmulateRunner(model).run([{"x": x}]).outputs[0]["y"]
    want = (x.astype(np.float32) @ weight.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16  # the same sums in another order: the fp16 results within a rounding or two
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=0.1)
