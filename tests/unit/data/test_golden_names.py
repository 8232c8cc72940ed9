"""Tensor names that cannot round-trip through a golden's ``.npz`` are refused when the golden is written (issue 33
item 9): before the fix, an output named ``"y\\nz"`` gave a golden that could never be read back, and
``--update-goldens`` wrote the same unreadable file again. Names that do round-trip are kept exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from harness.core.errors import ModelError
from harness.data.goldens import Golden, GoldenStore
from harness.data.models import resolve_model
from harness.data.recipes import InputRecipe
from tests.helpers.graphs import make_model, save

pytest_plugins = ["pytester"]
RECIPE = InputRecipe(seed=4)


def relu_model(out: str) -> object:
    node = helper.make_node("Relu", ["x"], [out])
    return make_model([node], [("x", TensorProto.FLOAT, [1, 4])], [(out, TensorProto.FLOAT, [1, 4])])


@pytest.mark.parametrize("name", ["y\nz", "y\n", "a\x00b", "\r\n"])
def test_a_name_that_cannot_round_trip_is_refused_and_nothing_is_written(tmp_path: Path, name: str) -> None:
    spec = resolve_model(str(save(relu_model("y"), tmp_path / "m.onnx")), search_dir=tmp_path)
    store = GoldenStore(tmp_path / "goldens")
    x = np.ones((1, 4), np.float32)
    with pytest.raises(ModelError) as err:
        store.write(spec, RECIPE, Golden(feeds=[{"x": x}], outputs=[{name: x}], meta={"producer": "t"}))
    assert err.value.where == str(spec.path) and repr(name) in str(err.value) and "rename" in err.value.fix
    assert not (tmp_path / "goldens").exists() or list((tmp_path / "goldens").rglob("*.*")) == []


@pytest.mark.parametrize("name", ["a/b", "tab\there", "ünïcode name", "out.npy", "0/1"])
def test_names_that_round_trip_are_kept_exactly(tmp_path: Path, name: str) -> None:
    spec = resolve_model(str(save(relu_model("y"), tmp_path / "m.onnx")), search_dir=tmp_path)
    store = GoldenStore(tmp_path / "goldens")
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    store.write(spec, RECIPE, Golden(feeds=[{name: x}], outputs=[{name: -x}], meta={"producer": "t"}))
    back = store.load(spec, RECIPE)
    assert list(back.feeds[0]) == [name] and list(back.outputs[0]) == [name]
    np.testing.assert_array_equal(back.outputs[0][name], -x)


@pytest.mark.parametrize("update", [False, True])
def test_a_run_on_a_model_with_a_newline_output_writes_no_golden(pytester: pytest.Pytester, update: bool) -> None:
    save(relu_model("y\nz"), pytester.path / "models" / "m.onnx")
    args = ["-p", "no:randomly", "--model", "models/m.onnx", "--precision", "fp16", "--data-max", "512"]
    args += ["--exclude-ops", "none", "--keep-io-types", "false", *(["--update-goldens"] if update else [])]
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert "tensor name(s) 'y\\nz' cannot be stored in a golden and read back" in out
    assert not (pytester.path / "goldens").exists() or list((pytester.path / "goldens").rglob("*.np*")) == []
