"""Huge declared or requested inputs are a usage error before anything is allocated (issue 33.12): the size in
bytes against the memory this machine has available (``CASTGUARD_MEMORY_LIMIT_MB`` caps it, so these tests do
not depend on the machine), in ``pytest --model``, the recipe planner and ``castguard convert``."""

from __future__ import annotations

import time
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from harness.core.errors import UserError
from harness.core.memory import available_bytes
from harness.data.recipes import InputRecipe, plan_inputs
from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[3]


def relu(dims: list[int | str], *, name: str = "x") -> onnx.ModelProto:
    x = helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    graph = helper.make_graph([helper.make_node("Relu", [name], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_machine_says_how_much_memory_it_has() -> None:
    found = available_bytes()
    assert found is not None and found > 2**20


def test_a_declared_input_beyond_memory_is_refused_naming_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASTGUARD_MEMORY_LIMIT_MB", "100")
    with pytest.raises(UserError, match=r"'x' of shape 1x10000000, is 40 MB.*320 MB.*105 MB of memory available"):
        plan_inputs(relu([1, 10_000_000]), InputRecipe(), where="m.onnx")
    plan_inputs(relu([1, 1000]), InputRecipe(), where="m.onnx")  # 4 kB: fine


def test_iterations_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASTGUARD_MEMORY_LIMIT_MB", "100")
    plan_inputs(relu([1, 1_000_000]), InputRecipe(), where="m.onnx")  # 4 MB x 8 copies
    with pytest.raises(UserError, match=r"5 iteration\(s\)"):
        plan_inputs(relu([1, 1_000_000]), InputRecipe(iterations=5), where="m.onnx")


def test_a_requested_shape_beyond_memory_is_refused() -> None:
    recipe = InputRecipe(input_shapes=(("input_ids", (1, 99_999_999_999)),))
    with pytest.raises(UserError, match=r"'input_ids' of shape 1x99999999999, is 400 GB"):
        plan_inputs(relu(["b", "s"], name="input_ids"), recipe, where="m.onnx")


@pytest.mark.parametrize("how", ["pytest", "convert", "pytest-shapes", "convert-shapes"])
def test_pytest_and_convert_refuse_before_running(tmp_path: Path, how: str, castguard_in: Run) -> None:
    folder = tmp_path / "a folder"
    folder.mkdir()
    shapes = how.endswith("-shapes")
    onnx.save(relu(["b", "s"], name="input_ids") if shapes else relu([1, 10**12]), folder / "m.onnx")
    tool = "pytest" if how.startswith("pytest") else "castguard"
    if tool == "pytest":
        args = ["--model", "m.onnx"]
        args += ["--input-shapes", "input_ids:1x99999999999"] if shapes else []
    else:
        args = ["convert", "--onnx_path", "m.onnx", "--output_path", "out.onnx"]
        args += ["--input_shapes", "input_ids:1x99999999999"] if shapes else []
    start = time.monotonic()
    done = castguard_in(folder, *args, tool=tool, timeout=300).proc
    text = done.stdout + done.stderr
    assert done.returncode in (2, 4), text[-2000:]
    assert "Traceback" not in text and "INTERNALERROR" not in text and "MemoryError" not in text
    assert ("400 GB" if shapes else "4 TB") in text and "of memory available" in text
    assert not (folder / "out.onnx").exists() and not (folder / "goldens").exists()
    assert time.monotonic() - start < 120
