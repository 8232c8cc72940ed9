"""The graph-output Cast guard: an output whose FP32 values the low type cannot hold is refused, naming the
output and suggesting keep_io_types, even when the node producing it was correctly kept FP32 (the zoo
SqueezeNet case: a last node kept FP32 by data_max, then the output Cast to fp16 made it inf)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.core.errors import ConversionError
from tests.helpers.convert_builders import F32, init, model, node, vi


def squeezenet_tail() -> object:
    """x -> Conv-like scale-up (Mul by 3e4, twice) -> GlobalAveragePool -> Flatten: output reaches ~1e9."""
    return model(
        [
            node("Mul", ["x", "k"], ["a"], "scale1"),
            node("Mul", ["a", "k"], ["b"], "scale2"),
            node("GlobalAveragePool", ["b"], ["g"], "gap"),
            node("Flatten", ["g"], ["y"], "flatten"),
        ],
        [vi("x", F32, [1, 2, 4, 4])],
        [vi("y", F32, [1, 2])],
        [init("k", np.full((1,), 3e4, np.float32))],
    )


def test_output_beyond_the_low_max_is_refused_with_its_name_and_the_fix() -> None:
    source = squeezenet_tail()
    data = collect_magnitudes(source, feeds=[{"x": np.ones((1, 2, 4, 4), np.float32)}])
    with pytest.raises(ConversionError, match="graph output 'y' reaches 9e\\+08") as err:
        convert(source, options=ConvertOptions(), magnitudes=data)
    assert "keep_io_types" in err.value.fix and err.value.node == "y"


@pytest.mark.parametrize("low", ["fp16", "bf16"])
def test_keep_io_types_converts_it_and_the_output_stays_fp32(low: str) -> None:
    source = squeezenet_tail()
    data = collect_magnitudes(source, feeds=[{"x": np.ones((1, 2, 4, 4), np.float32)}])
    result = convert(source, options=ConvertOptions(low_precision_type=low, keep_io_types=True), magnitudes=data)
    assert result.model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    kept = dict(result.high_nodes)
    if low == "fp16":
        assert kept["flatten"].startswith("data_max") and kept["gap"].startswith("data_max")
