"""onnx's checker on a loaded model, without the weights' bytes (:mod:`harness.data.onnxcheck`): the checker gets a
copy of a few kilobytes whatever the model's size, and what it would have read in the weights (each raw tensor's
size against its shape and type) is still refused, in one error naming the file, the tensor and the fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.core.errors import ModelError
from harness.data.onnxfile import load_model


def _matmul_model(weight: onnx.TensorProto, *, width: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", weight.name], ["y"], name="mm")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_checker_gets_the_graph_without_the_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    width = 1024  # 4 MB of weights
    weight = numpy_helper.from_array(np.ones((width, width), np.float32), "w")
    path = tmp_path / "big.onnx"
    onnx.save(_matmul_model(weight, width=width), path)
    given: list[int] = []
    real = onnx.checker.check_model

    def recorded(model: onnx.ModelProto | str, *args: object, **kwargs: object) -> None:
        given.append(model.ByteSize() if isinstance(model, onnx.ModelProto) else -1)
        real(model, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx.checker, "check_model", recorded)
    model = load_model(path)
    assert len(given) == 1 and 0 < given[0] < 10_000
    assert len(model.graph.initializer[0].raw_data) == 4 * width * width  # the loaded model keeps its weights


@pytest.mark.parametrize("width", [4, 512])  # in the checker's copy (16 floats), and left out of it (a MB)
def test_a_raw_tensor_shorter_than_its_shape_is_refused_with_the_file_and_the_tensor(
    tmp_path: Path, width: int
) -> None:
    weight = numpy_helper.from_array(np.ones((width, width), np.float32), "w")
    weight.raw_data = weight.raw_data[:-4]
    path = tmp_path / "short.onnx"
    onnx.save(_matmul_model(weight, width=width), path)
    with pytest.raises(ModelError) as caught:
        load_model(path)
    text = str(caught.value)
    assert "short.onnx" in text and "not a valid ONNX model" in text and "tensor name: w" in text
    assert "raw_data size" in text and f"{4 * width * width - 4} bytes" in text


def test_an_undefined_input_is_still_refused_in_a_model_with_big_weights(tmp_path: Path) -> None:
    width = 512
    weight = numpy_helper.from_array(np.ones((width, width), np.float32), "w")
    model = _matmul_model(weight, width=width)
    model.graph.node[0].input[0] = "nowhere"
    path = tmp_path / "broken.onnx"
    onnx.save(model, path)
    with pytest.raises(ModelError, match="not a valid ONNX model.*nowhere"):
        load_model(path)
