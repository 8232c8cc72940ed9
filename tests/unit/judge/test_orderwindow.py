"""Order statistics in the first pass from a sample's windows (:mod:`harness.judge.orderwindow`): a good sample
saves the passes, a bad one (another distribution, the wrong count, a window over its memory) only costs passes:
the figures are numpy's, bit for bit, whatever the sample."""

from __future__ import annotations

import numpy as np
import pytest

from harness.judge import orderstats
from harness.judge.compare import Tolerance, compare_iterations
from harness.judge.orderwindow import Sample
from tests.helpers.streams import chunked, same


def _check(stats: list[orderstats.Stats], values: np.ndarray, q: float) -> None:
    for (top, _, median, quantile), stream in zip(stats, (values, 3 * values)):
        assert top == stream.max()
        assert same(median, float(np.median(stream)))
        with np.errstate(invalid="ignore"):
            assert same(quantile, float(np.quantile(stream, q)))


def test_a_uniform_sample_finds_every_rank_in_the_first_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(orderstats, "COLLECT", 10_000)
    rng = np.random.default_rng(3)
    for q in (0.5, 0.9, 0.99, 0.999):
        values = np.abs(rng.standard_normal(200_000)) * 10.0 ** rng.integers(-3, 3, 200_000)
        drawn = values[rng.integers(0, values.size, 20_000)]
        passes: list[int] = []
        sample = lambda drawn=drawn, n=values.size: Sample(values=(drawn, 3 * drawn), population=n)  # noqa: E731
        stats = orderstats.order_stats(chunked(values, 4096, passes), streams=2, q=q, sample=sample)
        assert len(passes) == 1
        _check(stats, values, q)


@pytest.mark.parametrize("kind", ["normal", "zeros", "ties", "inf", "wide"])
def test_a_wrong_sample_costs_passes_never_the_figures(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples of another distribution, of one value, of the wrong count, and windows too big for their share:
    every figure is still numpy's, in at most six passes (the first, a histogram pass, then the radix levels)."""
    rng = np.random.default_rng(hash(kind) % 2**32)
    for _ in range(40):
        n, chunk = int(rng.integers(2, 3000)), int(rng.integers(1, 500))
        monkeypatch.setattr(orderstats, "COLLECT", int(rng.integers(1, 50)))
        values = np.abs(rng.standard_normal(n))
        if kind == "zeros":
            values[:] = 0.0
        elif kind == "ties":
            values = values.round(1)
        elif kind == "inf":
            values[rng.integers(0, n, size=max(1, n // 10))] = np.inf
        elif kind == "wide":
            values *= 10.0 ** rng.integers(-300, 300, size=n)
        wrong = [values[rng.integers(0, n, 50)] * 1000.0, np.zeros(7), values[:3], np.full(9, np.inf), values.copy()]
        drawn = wrong[int(rng.integers(0, len(wrong)))]
        population = int(rng.choice([n, n + 1]))
        q = float(rng.choice([0.0, 0.5, 0.9, 0.99, 1.0, rng.random()]))
        passes: list[int] = []
        sample = lambda drawn=drawn, population=population: Sample(  # noqa: E731
            values=(drawn, 3 * drawn), population=population
        )
        stats = orderstats.order_stats(chunked(values, chunk, passes), streams=2, q=q, sample=sample)
        assert len(passes) <= 6
        _check(stats, values, q)


def test_the_judge_of_a_large_output_takes_one_pass_and_keeps_numpy_s_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the judge (its own sample of 2**18 random positions): the abs and rel errors' median and quantile
    in the first pass over the chunks, equal to the whole-array formulas."""
    monkeypatch.setattr(orderstats, "COLLECT", 20_000)
    made: list[int] = []
    real = orderstats._pass

    def counted(*args: object, **kwargs: object) -> None:
        made.append(1)
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(orderstats, "_pass", counted)
    rng = np.random.default_rng(5)
    gold = (rng.standard_normal((3, 64, 1200)) * 4).astype(np.float32)
    got = gold.astype(np.float16).astype(np.float32)
    tol = Tolerance(atol=1e-3, rtol=1e-3, mode="median", quantile=0.99)
    out = compare_iterations([{"y": got}], [{"y": gold}], tolerances={}, default=tol).outputs[0]
    assert made == []  # no pass after the first
    a, b = got.astype(np.float64).ravel(), gold.astype(np.float64).ravel()
    abs_err = np.abs(a - b)
    rel_err = abs_err / np.where(b == 0, 2.220446049250313e-16, np.abs(b))
    assert (out.median_abs, out.quantile_abs) == (np.median(abs_err), np.quantile(abs_err, 0.99))
    assert (out.median_rel, out.quantile_rel) == (np.median(rel_err), np.quantile(rel_err, 0.99))


def test_an_output_equal_to_its_golden_is_counted_in_one_pass_without_keeping_its_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every error 0 (the FP32 golden check), or most of them: the window up to 0 counts the zeros and keeps none
    (a window keeping them would outgrow its share and cost two passes more)."""
    monkeypatch.setattr(orderstats, "COLLECT", 1000)
    kept: list[int] = []
    real_concatenate = np.concatenate

    def watched(arrays: object, *args: object, **kwargs: object) -> np.ndarray:
        result: np.ndarray = real_concatenate(arrays, *args, **kwargs)  # type: ignore[call-overload]
        kept.append(result.size)
        return result

    rng = np.random.default_rng(9)
    for share in (1.0, 0.7):
        values = np.where(rng.random(100_000) < share, 0.0, np.abs(rng.standard_normal(100_000)))
        drawn = values[rng.integers(0, values.size, 20_000)]
        passes: list[int] = []
        sample = lambda drawn=drawn, n=values.size: Sample(values=(drawn, 3 * drawn), population=n)  # noqa: E731
        with monkeypatch.context() as patch:
            patch.setattr(np, "concatenate", watched)
            stats = orderstats.order_stats(chunked(values, 4096, passes), streams=2, q=0.5, sample=sample)
        assert len(passes) == 1 and max(kept, default=0) == 0
        _check(stats, values, 0.5)
