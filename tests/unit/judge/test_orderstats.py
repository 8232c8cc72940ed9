"""The judge's statistics without a scratch array (issue 31): radix selection over the chunks' bits gives exactly
``np.median`` and ``np.quantile`` for every shape of data, however the values are chunked and however few values
may be gathered at once."""

from __future__ import annotations

import numpy as np
import pytest

from harness.judge import orderstats
from harness.judge.compare import Tolerance, compare_iterations
from tests.helpers.streams import chunked, same


def _values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return np.abs(rng.standard_normal(n))
    if kind == "zeros":
        return np.zeros(n)
    if kind == "ties":
        return np.abs(rng.standard_normal(n)).round(1)
    if kind == "inf":
        values = np.abs(rng.standard_normal(n))
        values[rng.integers(0, n, size=max(1, n // 10))] = np.inf
        return values
    wide: np.ndarray = np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(-300, 300, size=n)  # every binade
    return wide


@pytest.mark.parametrize("kind", ["normal", "zeros", "ties", "inf", "wide"])
def test_order_statistics_equal_numpy_bit_for_bit(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(hash(kind) % 2**32)
    for _ in range(40):
        n, chunk = int(rng.integers(1, 3000)), int(rng.integers(1, 500))
        monkeypatch.setattr(orderstats, "COLLECT", int(rng.integers(1, 50)))  # force the histogram passes
        values = _values(kind, n, rng)
        q = float(rng.choice([0.0, 0.5, 0.9, 0.99, 1.0, rng.random()]))
        passes: list[int] = []
        stats = orderstats.order_stats(chunked(values, chunk, passes), streams=2, q=q)
        assert len(passes) <= 5  # the first pass, then at most four levels of 16 bits (the last one gathers)
        if kind == "zeros":
            assert len(passes) <= 2  # one value: known once a pass sees its candidates' min equal their max
        for (top, mean, median, quantile), stream in zip(stats, (values, 3 * values)):
            assert top == stream.max()
            assert same(median, float(np.median(stream)))
            with np.errstate(invalid="ignore"):
                assert same(quantile, float(np.quantile(stream, q)))
            assert same(mean, float(stream.mean())) or mean == pytest.approx(stream.mean(), rel=1e-12)


def test_a_large_output_is_judged_without_holding_every_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond one gather, the judge's figures still equal the whole-array formulas, and no array of the output's
    size is made: numpy's median/quantile are never called on it."""
    monkeypatch.setattr(orderstats, "COLLECT", 1000)
    monkeypatch.setattr("harness.judge.elementwise.DIFF_CHUNK", 777)

    def whole_array(values: np.ndarray, q: float) -> orderstats.Stats:
        raise AssertionError(f"every error ({values.size}) held at once")

    monkeypatch.setattr(orderstats, "_direct", whole_array)
    rng = np.random.default_rng(7)
    gold = rng.standard_normal((4, 2500)).astype(np.float32)
    got = (gold + rng.standard_normal(gold.shape).astype(np.float32) * 1e-3).astype(np.float16)
    tol = Tolerance(atol=1e-3, rtol=1e-3, mode="median", quantile=0.95)
    out = compare_iterations([{"y": got}], [{"y": gold}], tolerances={}, default=tol).outputs[0]
    a, b = got.astype(np.float64).ravel(), gold.astype(np.float64).ravel()
    abs_err = np.abs(a - b)
    rel_err = abs_err / np.where(b == 0, 2.220446049250313e-16, np.abs(b))
    assert (out.max_abs, out.median_abs, out.quantile_abs) == (
        abs_err.max(),
        np.median(abs_err),
        np.quantile(abs_err, 0.95),
    )
    assert (out.max_rel, out.median_rel, out.quantile_rel) == (
        rel_err.max(),
        np.median(rel_err),
        np.quantile(rel_err, 0.95),
    )
    assert out.mean_abs == pytest.approx(abs_err.mean(), rel=1e-12)
    assert out.n_total == 10000 and out.n_over == int(((abs_err > 1e-3) & (rel_err > 1e-3)).sum())


def test_a_large_stream_gathers_a_32nd_of_its_values_instead_of_a_third_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket of more than COLLECT candidates in a stream of more than 32 x COLLECT values is gathered at once (a
    32nd of the stream at the most) rather than histogrammed again: two passes, not three (the judge of a decoder's
    131 M logits: one pass over every error less), with numpy's figures exactly."""
    monkeypatch.setattr(orderstats, "COLLECT", 100)
    rng = np.random.default_rng(11)
    values = 2.0 ** rng.uniform(0, 4, 20_000)  # 64 top-16-bit buckets of about 310 values: over 100, under 625
    passes: list[int] = []
    stats = orderstats.order_stats(chunked(values, 1000, passes), streams=2, q=0.9)
    assert len(passes) == 2
    for (_, _, median, quantile), stream in zip(stats, (values, 3 * values)):
        assert median == float(np.median(stream)) and quantile == float(np.quantile(stream, 0.9))
