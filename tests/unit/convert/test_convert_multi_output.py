"""Nodes with several outputs where some are graph outputs or unused (found on the ONNX node tests:
LayerNormalization's Mean, Split, BatchNormalization in training mode, LSTM's Y_h)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.runners import make_runner
from tests.helpers.convert_builders import F32, init, model, node, vi

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16


def split_three() -> onnx.ModelProto:
    """Split x[6] in three; parts 0 and 2 are graph outputs, part 1 feeds a Relu (opset 18)."""
    return model(
        [node("Split", ["x"], ["p0", "p1", "p2"], "split", axis=0, num_outputs=3), node("Relu", ["p1"], ["r"], "relu")],
        [vi("x", F32, [6])],
        [vi("p0", F32, [2]), vi("r", F32, [2]), vi("p2", F32, [2])],
        opset=18,
    )


def layer_norm_with_stats() -> onnx.ModelProto:
    """LayerNormalization whose Mean is a graph output and whose InvStdDev nobody reads."""
    return model(
        [node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv"], "ln", axis=-1)],
        [vi("x", F32, [2, 4])],
        [vi("y", F32, [2, 4]), vi("mean", F32, [2, 1])],
        [init("g", np.ones(4, np.float32)), init("b", np.zeros(4, np.float32))],
    )


def batchnorm_training() -> onnx.ModelProto:
    """BatchNormalization(training_mode=1): Y and running_mean are graph outputs, running_var is not."""
    c = 3
    inits = [
        init("s", np.ones(c, np.float32)),
        init("bias", np.zeros(c, np.float32)),
        init("m", np.zeros(c, np.float32)),
        init("v", np.ones(c, np.float32)),
    ]
    return model(
        [node("BatchNormalization", ["x", "s", "bias", "m", "v"], ["y", "rm", "rv"], "bn", training_mode=1)],
        [vi("x", F32, [2, c, 4])],
        [vi("y", F32, [2, c, 4]), vi("rm", F32, [c])],
        inits,
        opset=15,
    )


BUILDERS = {"split": split_three, "layernorm": layer_norm_with_stats, "batchnorm_training": batchnorm_training}


@pytest.mark.parametrize("keep_io_types", [False, True])
@pytest.mark.parametrize("low", ["fp16", "bf16"])
@pytest.mark.parametrize("build", list(BUILDERS))
def test_multi_output_node_with_graph_outputs_converts_and_runs(build: str, low: str, keep_io_types: bool) -> None:
    source = BUILDERS[build]()
    options = ConvertOptions(low_precision_type=low, keep_io_types=keep_io_types)
    result = convert(source, options=options, magnitudes=collect_magnitudes(source))
    onnx.checker.check_model(result.model, full_check=True)
    want = F32 if keep_io_types else (F16 if low == "fp16" else BF16)
    assert [o.type.tensor_type.elem_type for o in result.model.graph.output] == [want] * len(source.graph.output)
    assert [o.name for o in result.model.graph.output] == [o.name for o in source.graph.output]
    if keep_io_types and build != "batchnorm_training":  # (ORT and the emulate oracle differ on training-mode
        # BatchNormalization in FP32 already). Same fp32 feed; the emulate runner rounds every low tensor
        shape = [d.dim_value for d in source.graph.input[0].type.tensor_type.shape.dim]
        feed = {"x": np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)}
        with make_runner("ort", source) as runner:
            gold = runner.infer(feed)
        with make_runner("emulate", result.model) as runner:
            got = runner.infer(feed)
        tol = 1e-2 if low == "fp16" else 5e-2
        for name, value in gold.items():
            np.testing.assert_allclose(got[name].astype(np.float32), value, atol=tol, rtol=tol)


def test_rms_normalization_bf16_reads_its_data_input_in_the_low_type() -> None:
    """RMSNormalization (opset 23): X is T, scale and Y are V, but onnx's inference ties Y to X; reading X
    as stored (fp32) gave 'Y has inconsistent type tensor(float)' in bf16."""
    source = model(
        [node("RMSNormalization", ["x", "w"], ["y"], "rms", axis=0)],
        [vi("x", F32, [3, 4]), vi("w", F32, [3, 4])],
        [vi("y", F32, [3, 4])],
        opset=23,
        ir=11,
    )
    for low in ("fp16", "bf16"):
        result = convert(
            source,
            options=ConvertOptions(low_precision_type=low, keep_io_types=True),
            magnitudes=collect_magnitudes(source),
        )
        onnx.checker.check_model(result.model, full_check=True)
        rms = next(n for n in result.model.graph.node if n.op_type == "RMSNormalization")
        assert all(name.endswith(f"_cast_to_{low}") for name in rms.input)
