"""castguard in your own tests: the `castguard` fixture (installed with castguard, nothing to import).

Run with `pytest` from this folder (add `-n 2` for xdist). The first run writes each model's FP32 golden and the
checks that wrote one fail once ("golden written ... review it, commit it, and rerun"); later runs compare.
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def calibration_batches() -> list[dict[str, np.ndarray]]:
    """Your own preprocessing and data: here, four 28x28 grey images in [0, 1] (mnist's input Input3)."""
    rng = np.random.default_rng(0)
    return [{"Input3": rng.uniform(0, 1, (1, 1, 28, 28)).astype(np.float32)} for _ in range(4)]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mnist_low_precision(castguard, calibration_batches, precision):
    # "mnist" is castguard's bundled model; give your own as a path relative to this project: "models/x.onnx"
    result = castguard.check("mnist", precision=precision, data_max=512, inputs=calibration_batches, runner="emulate")
    assert result.passed, result.explain()
    assert result.lowp_flop_share is not None and result.lowp_flop_share > 0.5  # most of the model runs low


def test_mnist_sweep(castguard, calibration_batches):
    results = castguard.sweep("mnist", precisions=["fp16", "bf16"], data_max=[8, 512], inputs=calibration_batches)
    assert len(results) == 4
    failed = [r.explain() for r in results if not r.passed]
    assert not failed, "\n".join(failed)
