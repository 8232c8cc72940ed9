"""Input recipes: option parsing, seeded generation, .npz / Polygraphy JSON loading, batch splitting, validation."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from harness.core.errors import InputDataError, UserError
from harness.data.recipes import (
    InputRecipe,
    describe_inputs,
    make_feeds,
    parse_input_shape,
    parse_val_range,
    recipe_for_file,
)
from tests.helpers.graphs import make_model

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(batch: int | str = 1):
    nodes = [
        helper.make_node("Identity", ["x"], ["y"]),
        helper.make_node("Identity", ["idx"], ["j"]),
        helper.make_node("Identity", ["mask"], ["m"]),
    ]
    return make_model(
        nodes,
        [("x", F32, [batch, 3]), ("idx", I64, [batch, 2]), ("mask", BOOL, [batch])],
        [("y", F32, [batch, 3]), ("j", I64, [batch, 2]), ("m", BOOL, [batch])],
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("x:[1,2]", ("x", 1.0, 2.0)), ("[0,1]", ("", 0.0, 1.0)), ("input:0:[-1e3, 5]", ("input:0", -1000.0, 5.0))],
)
def test_parse_val_range(text: str, expected: tuple[str, float, float]) -> None:
    assert parse_val_range(text) == expected


@pytest.mark.parametrize("text", ["x:1,2", "x:[2,1]", "x:[a,b]", "x:[nan,1]"])
def test_parse_val_range_errors_name_the_option(text: str) -> None:
    with pytest.raises(UserError, match="--val-range"):
        parse_val_range(text)


def test_parse_input_shape() -> None:
    assert parse_input_shape("x:1x3x224x224") == ("x", (1, 3, 224, 224))
    assert parse_input_shape("input:0:[2,3]") == ("input:0", (2, 3))
    with pytest.raises(UserError, match="NAME:1x3x224x224"):
        parse_input_shape("x=1x3")


def test_generation_is_seeded_typed_and_in_range() -> None:
    recipe = InputRecipe(seed=3, iterations=2, val_ranges=(("x", 5.0, 6.0),))
    feeds = make_feeds(_model(), recipe, where="m.onnx")
    again = make_feeds(_model(), recipe, where="m.onnx")
    assert len(feeds) == 2
    for a, b in zip(feeds, again):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    x, idx, mask = feeds[0]["x"], feeds[0]["idx"], feeds[0]["mask"]
    assert x.dtype == np.float32 and ((5 <= x) & (x <= 6)).all()
    assert idx.dtype == np.int64 and set(np.unique(idx)) <= {0, 1}
    assert mask.dtype == np.bool_
    other = make_feeds(_model(), InputRecipe(seed=4), where="m.onnx")
    assert not np.array_equal(other[0]["x"], feeds[0]["x"])


def test_default_range_and_named_override() -> None:
    recipe = InputRecipe(val_ranges=(("", 10.0, 11.0), ("x", -1.0, -0.5)))
    feed = make_feeds(_model(), recipe, where="m.onnx")[0]
    assert ((feed["x"] >= -1) & (feed["x"] <= -0.5)).all()
    assert ((feed["idx"] >= 10) & (feed["idx"] <= 11)).all()


def test_a_dynamic_batch_defaults_to_one_and_the_plan_says_so() -> None:
    model = _model(batch="N")
    recipe = InputRecipe()
    feeds = make_feeds(model, recipe, where="m.onnx")
    assert feeds[0]["x"].shape == (1, 3) and feeds[0]["mask"].shape == (1,)  # mask shares 'N' with x
    info = describe_inputs(model, recipe, feeds)
    assert any("x dim 0 ('N') is dynamic: set to 1" in line for line in info["plan"])
    shaped = InputRecipe(input_shapes=(("x", (4, 3)), ("idx", (4, 2)), ("mask", (4,))))
    assert make_feeds(model, shaped, where="m.onnx")[0]["x"].shape == (4, 3)


def test_unknown_names_and_bad_shapes_are_user_errors() -> None:
    with pytest.raises(UserError, match="no input named 'z'") as err:
        make_feeds(_model(), InputRecipe(val_ranges=(("z", 0.0, 1.0),)), where="m.onnx")
    assert "--val-range" in str(err.value) and "use one of: x, idx, mask" in str(err.value)
    with pytest.raises(UserError, match="does not fit the declared shape"):
        make_feeds(_model(), InputRecipe(input_shapes=(("x", (1, 4)),)), where="m.onnx")


def test_npz_splits_into_iterations_like_autocast(tmp_path: Path) -> None:
    path = tmp_path / "stack.npz"
    np.savez(
        path, x=np.arange(30, dtype=np.float32).reshape(10, 3), idx=np.zeros((10, 2), np.int64), mask=np.ones(10, bool)
    )
    feeds = make_feeds(_model(), recipe_for_file(path), where="m.onnx")
    assert len(feeds) == 10
    np.testing.assert_array_equal(feeds[4]["x"], [[12, 13, 14]])


def _polygraphy_json(path: Path, feeds: list[dict[str, np.ndarray]]) -> Path:
    def encode(arr: np.ndarray) -> dict[str, str]:
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        return {"array": base64.b64encode(buf.getvalue()).decode(), "polygraphy_class": "ndarray"}

    path.write_text(json.dumps([{k: encode(v) for k, v in feed.items()} for feed in feeds]))
    return path


def test_polygraphy_json_round_trip(tmp_path: Path) -> None:
    feeds = [
        {"x": np.full((1, 3), i, np.float32), "idx": np.zeros((1, 2), np.int64), "mask": np.ones(1, bool)}
        for i in range(3)
    ]
    path = _polygraphy_json(tmp_path / "inputs.json", feeds)
    loaded = make_feeds(_model(), recipe_for_file(path), where="m.onnx")
    assert len(loaded) == 3 and loaded[2]["x"][0, 0] == 2


def test_pickled_object_npz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.npz"
    np.savez(path, x=np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputDataError, match="pickled Python objects") as err:
        make_feeds(_model(), recipe_for_file(path), where="m.onnx")
    assert str(path) in str(err.value)


def test_pickled_json_payload_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    np.save(buf, np.array([object()], dtype=object), allow_pickle=True)
    path = tmp_path / "evil.json"
    path.write_text(json.dumps([{"x": {"array": base64.b64encode(buf.getvalue()).decode()}}]))
    with pytest.raises(InputDataError, match="without unpickling"):
        make_feeds(_model(), recipe_for_file(path), where="m.onnx")


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"x": np.zeros((1, 3), np.float32), "idx": np.zeros((1, 2), np.int64)}, "names do not match"),
        ({"x": np.zeros((1, 3)), "idx": np.zeros((1, 2), np.int64), "mask": np.ones(1, bool)}, "dtype float64"),
        ({"x": np.zeros((1, 4), np.float32), "idx": np.zeros((1, 2), np.int64), "mask": np.ones(1, bool)}, "dim 1"),
        ({"x": np.zeros(3, np.float32), "idx": np.zeros((1, 2), np.int64), "mask": np.ones(1, bool)}, "rank 1"),
    ],
)
def test_mismatched_files_get_one_clear_error(tmp_path: Path, arrays: dict[str, np.ndarray], message: str) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(InputDataError, match=message) as err:
        make_feeds(_model(), recipe_for_file(path), where="m.onnx")
    assert str(err.value).startswith(str(path)) and "fix:" in str(err.value)


def test_garbage_and_unknown_files(tmp_path: Path) -> None:
    garbage = tmp_path / "g.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(InputDataError, match="not a readable .npz"):
        make_feeds(_model(), recipe_for_file(garbage), where="m.onnx")
    other = tmp_path / "x.csv"
    other.write_text("1,2")
    with pytest.raises(InputDataError, match="unsupported inputs file type"):
        make_feeds(_model(), recipe_for_file(other), where="m.onnx")
    with pytest.raises(InputDataError, match="does not exist"):
        recipe_for_file(tmp_path / "missing.npz")


def test_recipe_ids_are_stable_and_distinct(tmp_path: Path) -> None:
    a = InputRecipe(seed=0, val_ranges=(("x", 1.0, 2.0),))
    assert a.id == InputRecipe(seed=0, val_ranges=(("x", 1.0, 2.0),)).id
    assert a.id.startswith("seed0-it1-") and a.id != InputRecipe(seed=0).id
    path = tmp_path / "f.npz"
    np.savez(path, x=np.zeros(1))
    assert recipe_for_file(path).id.startswith("file-")


def test_bf16_inputs_generated_and_accepted_as_bits() -> None:
    bf16 = TensorProto.BFLOAT16
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], [("x", bf16, [2])], [("y", bf16, [2])])
    feed = make_feeds(model, InputRecipe(), where="m.onnx")[0]
    assert feed["x"].dtype == np.dtype(ml_dtypes.bfloat16)


def test_stacked_npz_with_an_extra_key_is_reported_not_split(tmp_path: Path) -> None:
    path = tmp_path / "stack.npz"
    np.savez(
        path,
        x=np.zeros((10, 3), np.float32),
        idx=np.zeros((10, 2), np.int64),
        mask=np.ones(10, bool),
        extra=np.zeros(10, np.float32),
    )
    with pytest.raises(InputDataError, match="unexpected \\['extra'\\]"):
        make_feeds(_model(), recipe_for_file(path), where="m.onnx")
