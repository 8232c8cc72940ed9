"""The FLOP share from real shapes (issue 32 item 2): without magnitudes (data_max inf) the shapes come from onnx
shape inference at the case's input shapes, never from guessed 1x1 dims; a node whose shape stays unknown makes
the share a bound and is named."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from harness.convert import ConvertOptions, ReferenceData, convert, convert_path
from tests.helpers.convert_builders import F32, init, model, node, vi

C, G, SIDE = 8, 2, 16


def group_norm_model(*, dynamic_sides: bool = False) -> onnx.ModelProto:
    """Conv -> torch's GroupNorm export (Reshape [0, G, -1] -> InstanceNormalization -> Reshape to Shape(x) ->
    Mul -> Add) -> Relu -> Conv, with a dynamic batch (and dynamic image sides, as a VAE decoder exports)."""
    sides: list[int | str] = ["height", "width"] if dynamic_sides else [SIDE, SIDE]
    rng = np.random.default_rng(0)
    conv_w = [init(f"W{i}", rng.standard_normal((C, C, 3, 3)).astype(np.float32) * 0.1) for i in (1, 2)]
    return model(
        [
            node("Conv", ["x", "W1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
            node("Reshape", ["c1", "grouped"], ["g"], "to_groups"),
            node("InstanceNormalization", ["g", "ones", "zeros"], ["gn"], "norm"),
            node("Shape", ["c1"], ["c1_shape"], "shape"),
            node("Reshape", ["gn", "c1_shape"], ["back"], "from_groups"),
            node("Mul", ["back", "gamma"], ["scaled"], "gamma_mul"),
            node("Add", ["scaled", "beta"], ["shifted"], "beta_add"),
            node("Relu", ["shifted"], ["r"], "relu"),
            node("Conv", ["r", "W2"], ["y"], "conv2", pads=[1, 1, 1, 1]),
        ],
        [vi("x", F32, ["batch", C, *sides])],
        [vi("y", F32, ["batch", C, *sides])],
        [
            *conv_w,
            init("grouped", np.array([0, G, -1], np.int64)),
            init("ones", np.ones(G, np.float32)),
            init("zeros", np.zeros(G, np.float32)),
            init("gamma", np.ones((C, 1, 1), np.float32)),
            init("beta", np.zeros((C, 1, 1), np.float32)),
        ],
    )


def hand_share(batch: int, side: int = SIDE) -> float:
    """conv1 kept FP32, and the Reshape after it (data movement follows its FP32 data); everything else low.
    Conv: 2 * output elements * in-channels * 3*3; Shape: its 4 elements; InstanceNormalization: its input; the
    rest: their outputs."""
    elements = batch * C * side * side
    conv = 2 * elements * C * 9
    low = elements * 5 + 4 + conv  # norm, from_groups, gamma_mul, beta_add, relu; shape; conv2
    return low / (low + conv + elements)


@pytest.mark.parametrize(("batch", "dynamic_sides"), [(1, False), (3, False), (2, True)])
def test_group_norm_share_without_magnitudes_is_the_real_one(batch: int, dynamic_sides: bool) -> None:
    graph = group_norm_model(dynamic_sides=dynamic_sides)
    options = ConvertOptions(nodes_to_exclude=("conv1",), keep_io_types=True)
    shapes = {"x": (batch, C, SIDE, SIDE)}  # the case's input shapes
    no_data = convert(graph, options=_unlimited(options), magnitudes=None, shapes=shapes)
    with_data = convert_path(graph, options=options, reference=ReferenceData(input_shapes=shapes))
    assert no_data.lowp_flop_share == pytest.approx(hand_share(batch), abs=1e-9)
    assert no_data.lowp_flop_share == pytest.approx(with_data.lowp_flop_share, abs=0.005)
    assert no_data.lowp_share_bound is None and with_data.lowp_share_bound is None
    cli_like = convert_path(
        graph, options=_unlimited(options), reference=ReferenceData()
    )  # castguard convert --data_max inf: no run, sized as its reference data would be (batch 1, sides 128)
    assert cli_like.lowp_flop_share == pytest.approx(hand_share(1, 128 if dynamic_sides else SIDE), abs=1e-9)


def test_a_node_with_an_unknown_shape_makes_the_share_a_bound_and_is_named() -> None:
    """NonZero's output size depends on the data: what reads it cannot be counted, and the share says so."""
    graph = model(
        [
            node("MatMul", ["x", "W"], ["m"], "mm"),
            node("NonZero", ["m"], ["where"], "nz"),
            node("Cast", ["where"], ["wf"], "to_float", to=TensorProto.FLOAT),
            node("Relu", ["wf"], ["y"], "relu_data_dependent"),
        ],
        [vi("x", F32, [4, 8])],
        [vi("y", F32, ["rank", "count"])],
        [init("W", np.ones((8, 8), np.float32))],
    )
    result = convert(graph, options=ConvertOptions(), magnitudes=None, shapes={"x": (4, 8)})
    assert result.lowp_share_bound is not None
    assert "relu_data_dependent" in result.lowp_share_bound and "unknown" in result.lowp_share_bound


def _unlimited(options: ConvertOptions) -> ConvertOptions:
    return dataclasses.replace(options, data_max=math.inf)
