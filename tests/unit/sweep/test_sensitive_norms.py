"""Issue 23 item 9: the built-in "sensitive" exclusion set keeps GroupNormalization and InstanceNormalization
(torch's export of GroupNorm) in FP32, as it does LayerNormalization."""

from __future__ import annotations

import numpy as np
import pytest

from harness.convert import convert
from harness.sweep import BUILTIN_EXCLUSIONS, SweepPoint
from tests.helpers.convert_builders import F32, init, model, node, vi


def norms_model() -> object:
    """x -> InstanceNormalization -> Relu -> y; x -> GroupNormalization (2 groups) -> g; at opset 21."""
    channels = 4
    ones, zeros = np.ones(channels, np.float32), np.zeros(channels, np.float32)
    shape = [1, channels, 3, 3]
    return model(
        [
            node("InstanceNormalization", ["x", "s1", "b1"], ["a"], "instance_norm", epsilon=1e-5),
            node("Relu", ["a"], ["y"], "relu"),
            node("GroupNormalization", ["x", "s2", "b2"], ["g"], "group_norm", num_groups=2, epsilon=1e-5),
        ],
        [vi("x", F32, shape)],
        [vi("y", F32, shape), vi("g", F32, shape)],
        [init("s1", ones), init("b1", zeros), init("s2", ones), init("b2", zeros)],
        opset=21,
    )


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_sensitive_exclusion_keeps_group_and_instance_norm_fp32(precision: str) -> None:
    none, sensitive = BUILTIN_EXCLUSIONS
    assert sensitive.name == "sensitive"
    kept = convert(
        norms_model(), options=SweepPoint(precision=precision, exclusion=sensitive).convert_options(), magnitudes=None
    )
    high = dict(kept.high_nodes)
    assert "instance_norm" in high and "group_norm" in high and "relu" in kept.low_nodes
    assert "InstanceNormalization" in high["instance_norm"] and "GroupNormalization" in high["group_norm"]
    free = convert(
        norms_model(), options=SweepPoint(precision=precision, exclusion=none).convert_options(), magnitudes=None
    )
    assert "instance_norm" in free.low_nodes  # without the set the converter puts it in low precision
