"""harness.judge.tolerances: the golden's scale, read without a float64 copy of the output (issue 31)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from harness.judge.tolerances import golden_scale


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int64])
def test_golden_scale_is_the_largest_finite_magnitude(dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.judge.tolerances.SCALE_CHUNK", 5)  # the masked way, over chunks
    rng = np.random.default_rng(0)
    values = (rng.standard_normal((3, 7)) * 20).astype(dtype)
    values.flat[4] = -97  # the largest magnitude is negative
    expected = float(np.abs(values.astype(np.float64)).max())
    assert golden_scale(values) == expected == 97.0
    if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16:
        with_specials = values.copy()
        with_specials.flat[[0, 9]] = [np.nan, -np.inf]
        wide = np.abs(with_specials.astype(np.float64))
        assert golden_scale(with_specials) == float(wide[np.isfinite(wide)].max())
        assert golden_scale(np.full(4, np.nan, dtype)) == 0.0
    assert golden_scale(np.zeros(0, dtype)) == 0.0 and golden_scale(np.array(-0.0)) == 0.0
