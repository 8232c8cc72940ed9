"""Inputs that mean something (issue 9, section 2): dynamic dims, Gather indices, shape-like and unknown ints,
zero-size dims, the ``--input-shapes`` forms, and the plan that says what was chosen."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from harness.core.errors import UserError
from harness.data.feeds import input_specs
from harness.data.recipes import InputRecipe, make_feeds, parse_input_shapes, plan_recipe, recipe_lines
from harness.data.roles import input_roles
from tests.helpers.graphs import bert_like_model, make_model

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
BERT = bert_like_model()


def test_a_dynamic_sequence_is_refused_naming_the_input_its_dim_param_and_the_fix() -> None:
    with pytest.raises(UserError) as err:
        make_feeds(BERT, InputRecipe(), where="bert.onnx")
    text = str(err.value)
    assert "input 'input_ids' dim 1 ('sequence')" in text and "input 'attention_mask' dim 1 ('sequence')" in text
    assert "dim 0" not in text  # the batch has a stated default, not a refusal
    assert "--input-shapes input_ids:1x128" in err.value.fix  # one input is enough: the others share 'sequence'


@pytest.mark.parametrize("shapes", ["input_ids:2x32", "input_ids:[2,32]", "input_ids:2x32,attention_mask:2x32"])
def test_given_shapes_spread_over_inputs_sharing_a_dim_param_and_token_ids_cover_the_vocabulary(shapes: str) -> None:
    recipe = plan_recipe(BERT, InputRecipe(input_shapes=parse_input_shapes(shapes)), where="bert.onnx")
    feed = make_feeds(BERT, recipe, where="bert.onnx")[0]
    assert {name: a.shape for name, a in feed.items()} == {n: (2, 32) for n in feed}
    ids = feed["input_ids"]
    assert ids.min() >= 0 and ids.max() < 30522
    assert (ids < 30522 // 2).any() and (ids >= 30522 // 2).any()  # spread, not {0, 1}
    assert set(np.unique(feed["token_type_ids"])) <= {0, 1}  # a 2-row table
    lines = recipe_lines(BERT, recipe)
    assert "input_ids int64[2x32]: ids uniform in [0, 30522): indices of Gather 'embeddings.word'" in lines
    assert any(
        line.startswith("attention_mask int64[2x32]: uniform in [0, 1]: castguard cannot tell")
        and "--val-range attention_mask:[lo,hi]" in line
        for line in lines
    )
    assert any("input_ids dim 0 ('batch') is dynamic" not in line for line in lines)


def test_the_recipe_id_follows_the_chosen_shapes_and_stays_for_static_float_models() -> None:
    one = plan_recipe(BERT, InputRecipe(input_shapes=(("input_ids", (1, 8)),)), where="m")
    two = plan_recipe(BERT, InputRecipe(input_shapes=(("input_ids", (1, 16)),)), where="m")
    assert one.id != two.id and ("ids:input_ids", "0..30521") in one.derived
    static = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", F32, [1, 4])], [("y", F32, [1, 4])])
    assert plan_recipe(static, InputRecipe(), where="m").id == InputRecipe().id == "seed0-it1-27a954eb"


def _reshape_model() -> object:
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")
    return make_model([node], [("x", F32, [2, 6]), ("shape", I64, [2])], [("y", F32, ["a", "b"])])


def test_a_shape_like_int_input_is_refused_unless_given() -> None:
    model = _reshape_model()
    assert input_roles(model)["shape"].kind == "shape"
    with pytest.raises(UserError, match="'shape' is a shape-like value \\(operand 1 of Reshape 'r'\\)") as err:
        make_feeds(model, InputRecipe(), where="m.onnx")
    assert "--inputs FILE.npz" in err.value.fix
    feed = make_feeds(model, InputRecipe(val_ranges=(("shape", 3.0, 3.0),)), where="m.onnx")[0]
    np.testing.assert_array_equal(feed["shape"], [3, 3])


def test_zero_size_dims_stay_zero_and_indices_through_a_cast_are_found() -> None:
    table = numpy_helper.from_array(np.zeros((7, 3), np.float32), "table")
    nodes = [
        helper.make_node("Cast", ["ids"], ["ids64"], to=I64),
        helper.make_node("Gather", ["table", "ids64"], ["g"], name="lookup"),
        helper.make_node("Identity", ["x"], ["y"]),
    ]
    model = make_model(
        nodes,
        [("ids", TensorProto.INT32, [1, 50]), ("x", F32, [2, 0, 3])],
        [("g", F32, [1, 50, 3]), ("y", F32, [2, 0, 3])],
        initializers=[table],
    )
    assert input_specs(model)[1].dims == (2, 0, 3)
    feed = make_feeds(model, InputRecipe(), where="m.onnx")[0]
    assert feed["x"].shape == (2, 0, 3)
    assert feed["ids"].dtype == np.int32 and feed["ids"].max() <= 6 and len(np.unique(feed["ids"])) > 2


@given(rows=st.integers(1, 5000), batch=st.integers(1, 3), length=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_gather_indices_are_always_valid_rows(rows: int, batch: int, length: int, seed: int) -> None:
    table = numpy_helper.from_array(np.zeros((rows, 2), np.float32), "table")
    model = make_model(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="g")],
        [("ids", I64, ["b", "n"])],
        [("y", F32, ["b", "n", 2])],
        initializers=[table],
    )
    recipe = InputRecipe(seed=seed, input_shapes=(("ids", (batch, length)),))
    ids = make_feeds(model, recipe, where="m")[0]["ids"]
    assert ids.shape == (batch, length) and ids.dtype == np.int64
    assert ids.min() >= 0 and ids.max() < rows


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x:1x3x224x224", (("x", (1, 3, 224, 224)),)),
        ("x:[1,3,224,224]", (("x", (1, 3, 224, 224)),)),
        ("x:1x3x224x224,mask:1x128", (("x", (1, 3, 224, 224)), ("mask", (1, 128)))),
        ("x:[1,3,224,224],mask:[1, 128]", (("x", (1, 3, 224, 224)), ("mask", (1, 128)))),
        ("input:0:[2,0]", (("input:0", (2, 0)),)),
    ],
)
def test_input_shapes_take_the_convert_list_and_polygraphy_forms(text: str, expected: tuple) -> None:
    assert parse_input_shapes(text) == expected


@pytest.mark.parametrize("text", ["x=1x3", "x:1x3,x:1x4", ""])
def test_bad_input_shapes_name_the_option(text: str) -> None:
    with pytest.raises(UserError, match="--input-shapes"):
        parse_input_shapes(text)
