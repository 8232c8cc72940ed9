"""The casts figure is one count everywhere (issue 32.9): the Casts the conversion inserted that are in the
converted model. The CLI's log line, ``ConversionResult.cast_count`` (the report's casts column and the nightly
``casts`` rule) and the legend agree, checked against an independent count: Cast nodes of the converted model
that the original model does not have. A user's int -> FLOAT Cast that castguard re-targets to fp16 (its own
Cast then removed) is the case that used to disagree: the CLI counted the removed Cast."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.report.format import LEGEND
from tests.helpers.graphs import make_model, save


def int_input_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT, name="user_cast"),
        helper.make_node("Mul", ["f", "w"], ["m"], name="mul"),
        helper.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    w = numpy_helper.from_array(np.full((1, 8), 0.5, np.float32), "w")
    return make_model(nodes, [("ids", TensorProto.INT64, [1, 8])], [("y", TensorProto.FLOAT, [1, 8])], initializers=[w])


def inserted(original: onnx.ModelProto, converted: onnx.ModelProto) -> int:
    names = {n.name for n in original.graph.node}
    return sum(1 for n in converted.graph.node if n.op_type == "Cast" and n.name not in names)


@pytest.mark.parametrize("keep_io", [False, True])
def test_cli_report_and_an_independent_count_agree_on_a_retargeted_cast(tmp_path: Path, keep_io: bool) -> None:
    model = int_input_model()
    path = save(model, tmp_path / "m.onnx")
    feeds = [{"ids": np.arange(8, dtype=np.int64).reshape(1, 8)}]
    magnitudes = collect_magnitudes(model, feeds=feeds)
    result = convert(model, options=ConvertOptions(keep_io_types=keep_io), magnitudes=magnitudes)
    user = next(n for n in result.model.graph.node if n.name == "user_cast")
    assert user.attribute[0].i == TensorProto.FLOAT16  # re-targeted: int64 -> fp16 directly
    assert result.cast_count == inserted(model, result.model) == (1 if keep_io else 0)
    out = tmp_path / "out.onnx"
    command = [sys.executable, "-m", "harness", "convert", "--onnx_path", str(path), "--output_path", str(out)]
    done = subprocess.run(
        command + (["--keep_io_types"] if keep_io else []), capture_output=True, text=True, timeout=120, check=True
    )
    said = re.search(r"(\d+) Casts inserted", done.stdout + done.stderr)
    assert said is not None and int(said[1]) == inserted(model, onnx.load(str(out))) == result.cast_count
    legend = dict(LEGEND)["casts"]
    assert "inserted" in legend and "own Casts are not counted" in legend
