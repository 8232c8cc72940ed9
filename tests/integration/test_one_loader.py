"""One ``load_model`` (harness/data/onnxfile.py), one decision about validation: ``castguard convert`` and
``pytest --model`` refuse the same model with the same error. Before, ``pytest --model`` ran onnx's checker
(harness/data/models.py's load_model) and ``castguard convert`` did not (harness/data/onnxfile.py's)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tests.conftest import Run

REPO = Path(__file__).resolve().parents[2]


def _parses_but_is_invalid(path: Path) -> Path:
    """A well-formed protobuf with a graph and an opset, whose node reads a tensor that nothing defines."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["nowhere"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def test_convert_and_the_plugin_refuse_the_same_model_the_same_way(tmp_path: Path, castguard_in: Run) -> None:
    bad = _parses_but_is_invalid(tmp_path / "models" / "bad.onnx")
    try:
        onnx.checker.check_model(bad)
        raise AssertionError("the model should fail onnx's checker")
    except onnx.checker.ValidationError:
        pass
    args = ("convert", "--onnx_path", str(bad), "--output_path", "out.onnx")
    convert = castguard_in(tmp_path, *args, tool="castguard", extra_path=[REPO], timeout=120).proc
    plugin = castguard_in(tmp_path, "--model", str(bad), extra_path=[REPO], timeout=120).proc
    assert convert.returncode != 0 and plugin.returncode != 0
    assert "Traceback" not in convert.stderr and not (tmp_path / "out.onnx").exists()
    said = f"{bad}: not a valid ONNX model:"
    assert said in convert.stderr, convert.stderr[-2000:]
    assert said in plugin.stdout + plugin.stderr, (plugin.stdout + plugin.stderr)[-2000:]
    assert "fix: re-export the model" in convert.stderr


def test_the_checker_sees_lazy_graphs_and_leaves_unknown_ops_to_the_converter(tmp_path: Path) -> None:
    """A lazy model (weights in a data file) is checked in memory without reading its weights; an op onnx has no
    schema for (a TensorRT plugin) is the converter's to judge (``custom_ops``), not the checker's."""
    import numpy as np
    import pytest
    from onnx import numpy_helper

    from harness.core.errors import ModelError
    from harness.data.onnxfile import load_model

    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("MyPlugin", ["h"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "m").mkdir()
    onnx.save(model, str(tmp_path / "m" / "model.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    lazy = load_model(tmp_path / "m" / "model.onnx", weights="lazy", lazy_above=0)
    assert [n.op_type for n in lazy.graph.node] == ["MatMul", "MyPlugin"] and lazy.graph.node[1].domain == ""
    assert len(lazy.graph.initializer) == 1 and not lazy.graph.initializer[0].raw_data  # still on disk

    broken = onnx.load(str(tmp_path / "m" / "model.onnx"), load_external_data=False)
    broken.graph.node[0].input[0] = "nowhere"
    onnx.save(broken, str(tmp_path / "m" / "broken.onnx"))
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        load_model(tmp_path / "m" / "broken.onnx", weights="lazy", lazy_above=0)
