"""harness.judge.compare: Polygraphy-compatible semantics, NaN/inf policy, structure failures, would-pass tolerances."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.judge import elementwise
from harness.judge.compare import Tolerance, compare_iterations, compare_outputs

EXACT = Tolerance(atol=0.0, rtol=0.0)


def _one(obtained: np.ndarray, expected: np.ndarray, tol: Tolerance = EXACT):
    result = compare_outputs({"y": obtained}, {"y": expected}, tolerances={}, default=tol)
    return result, result.outputs[0]


def test_identical_outputs_pass_with_zero_tolerance() -> None:
    x = np.linspace(-3, 3, 50, dtype=np.float32)
    result, out = _one(x, x.copy())
    assert result and out.passed
    assert out.max_abs == 0.0 and out.n_over == 0 and out.n_total == 50


def test_or_semantics_like_polygraphy() -> None:
    # 1e-6 vs 0: rel is huge but abs is under atol -> pass; 1000.5 vs 1000: abs over atol, rel under rtol -> pass.
    _, small = _one(np.array([1e-6]), np.array([0.0]), Tolerance(atol=1e-5, rtol=1e-5))
    _, large = _one(np.array([1000.5]), np.array([1000.0]), Tolerance(atol=1e-5, rtol=1e-3))
    assert small.passed and small.max_rel > 1e9
    assert large.passed and large.max_abs == pytest.approx(0.5)


def test_element_over_both_fails_and_reports_would_pass() -> None:
    expected = np.array([1.0, 2.0, 4.0])
    obtained = np.array([1.0, 2.1, 4.0])
    result, out = _one(obtained, expected, Tolerance(atol=1e-3, rtol=1e-3))
    assert not result
    assert out.n_over == 1
    assert out.required_atol == pytest.approx(0.1)
    assert out.required_rtol == pytest.approx(0.05)
    assert "would pass with atol>=0.1" in result.summary()
    assert compare_outputs(
        {"y": obtained}, {"y": expected}, tolerances={}, default=Tolerance(atol=out.required_atol, rtol=0.0)
    )


def test_isclose_mode_is_numpy_isclose() -> None:
    expected = np.array([1.0, 100.0])
    obtained = np.array([1.05, 100.5])
    tol = Tolerance(atol=0.01, rtol=0.01, mode="isclose")
    _, out = _one(obtained, expected, tol)
    assert out.n_over == int((~np.isclose(obtained, expected, atol=0.01, rtol=0.01)).sum()) == 1


def test_median_hides_outlier_but_max_does_not() -> None:
    expected = np.ones(10)
    obtained = np.array([1.0] * 9 + [100.0])
    _, med = _one(obtained, expected, Tolerance(atol=1e-5, rtol=1e-5, mode="median"))
    _, mx = _one(obtained, expected, Tolerance(atol=1e-5, rtol=1e-5, mode="max"))
    assert med.passed and not mx.passed
    assert mx.required_atol == pytest.approx(99.0)


def test_quantile_mode_uses_the_quantile() -> None:
    expected = np.zeros(100)
    obtained = np.zeros(100)
    obtained[-1] = 1.0
    _, q = _one(obtained, expected, Tolerance(atol=1e-3, rtol=1e-3, mode="quantile", quantile=0.9))
    assert q.passed and q.quantile_abs == 0.0


@pytest.mark.parametrize(
    ("a", "b", "tol", "passes"),
    [
        (np.nan, np.nan, Tolerance(), True),  # NaN where the golden is NaN: equal (issue 23)
        (np.nan, np.nan, Tolerance(nan_equal=False), False),
        (np.nan, 0.5, Tolerance(atol=1e9, rtol=1e9), False),  # NaN where the golden is finite: still a failure
        (0.5, np.nan, Tolerance(atol=1e9, rtol=1e9), False),
        (np.inf, np.inf, Tolerance(), True),
        (np.inf, np.inf, Tolerance(inf_equal=False), False),
        (-np.inf, np.inf, Tolerance(), False),
        (np.inf, 1.0, Tolerance(atol=1e9, rtol=1e9), False),
        (np.nan, 1.0, Tolerance(atol=1e9, rtol=1e9), False),
    ],
)
def test_nan_inf_policy(a: float, b: float, tol: Tolerance, passes: bool) -> None:
    _, out = _one(np.array([a, 0.0]), np.array([b, 0.0]), tol)
    assert out.passed is passes
    if not passes:
        assert out.required_atol == math.inf and "non-finite" in out.reason


def test_median_mode_never_hides_a_nan() -> None:
    obtained = np.array([1.0] * 9 + [np.nan])
    _, out = _one(obtained, np.ones(10), Tolerance(atol=1e-3, rtol=1e-3, mode="median"))
    assert not out.passed


def test_missing_extra_shape_and_dtype_are_failures() -> None:
    expected = {"a": np.zeros(3, np.float32), "b": np.zeros(2, np.float32), "c": np.zeros(2, np.int64)}
    obtained = {"a": np.zeros(4, np.float32), "c": np.zeros(2, np.float32), "z": np.zeros(1, np.float32)}
    result = compare_outputs(obtained, expected, tolerances={}, default=Tolerance())
    assert not result
    assert result.missing == ("b",) and result.extra == ("z",)
    by_name = {o.name: o for o in result.outputs}
    assert "shape changed" in by_name["a"].reason and not by_name["a"].passed
    assert "dtype changed" in by_name["c"].reason and not by_name["c"].passed
    text = result.summary()
    assert "missing output 'b'" in text and "extra output 'z'" in text


def test_float_precision_change_is_allowed_and_widened_exactly() -> None:
    expected = np.array([1.0, 0.1], np.float32)
    obtained_fp16 = expected.astype(np.float16)
    obtained_bf16 = expected.astype(ml_dtypes.bfloat16)
    _, h = _one(obtained_fp16, expected, Tolerance(atol=0, rtol=1e-3))
    _, b = _one(obtained_bf16, expected, Tolerance(atol=0, rtol=4e-3))
    assert h.passed and h.max_abs == pytest.approx(abs(float(np.float16(0.1)) - float(np.float32(0.1))))
    assert b.passed and b.max_abs > h.max_abs


def test_per_output_tolerances_and_unknown_names() -> None:
    expected = {"p": np.array([1.0]), "q": np.array([1.0])}
    obtained = {"p": np.array([1.5]), "q": np.array([1.5])}
    result = compare_outputs(obtained, expected, tolerances={"p": Tolerance(atol=1.0)}, default=EXACT)
    assert [o.passed for o in result.outputs] == [True, False]
    with pytest.raises(ValueError, match="not in the golden"):
        compare_outputs(obtained, expected, tolerances={"nope": Tolerance()}, default=EXACT)


def test_top_k_agreement() -> None:
    expected = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2]])
    swapped = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2]])
    tol = Tolerance(atol=1.0, rtol=1.0, top_k=1)
    _, bad = _one(swapped, expected, tol)
    _, good = _one(expected + 0.01, expected, tol)
    assert bad.top_k_agreement == 0.5 and not bad.passed
    assert good.top_k_agreement == 1.0 and good.passed


def test_iterations_pool_statistics_and_count_mismatch_fails() -> None:
    exp = [{"y": np.array([1.0])}, {"y": np.array([2.0])}]
    got = [{"y": np.array([1.0])}, {"y": np.array([2.5])}]
    result = compare_iterations(got, exp, tolerances={}, default=EXACT)
    assert result.outputs[0].n_total == 2 and result.outputs[0].n_over == 1
    short = compare_iterations(got[:1], exp, tolerances={}, default=Tolerance(atol=1.0))
    assert not short and "iteration count changed" in short.summary()


def test_bool_and_int_outputs() -> None:
    _, b = _one(np.array([True, False]), np.array([True, True]))
    _, i = _one(np.array([3, 4], np.int64), np.array([3, 4], np.int64))
    assert not b.passed and b.n_over == 1
    assert i.passed


def test_invalid_tolerance_is_rejected() -> None:
    with pytest.raises(ValueError, match="mode"):
        Tolerance(mode="loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="atol"):
        Tolerance(atol=-1.0)


finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, width=32)


@given(
    hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=6), elements=finite),
    hnp.arrays(np.float32, 1, elements=st.floats(min_value=-1, max_value=1, width=32)),
)
def test_required_tolerances_really_pass(expected: np.ndarray, noise: np.ndarray) -> None:
    obtained = (expected + noise[0]).astype(np.float32)
    _, out = _one(obtained, expected, Tolerance(atol=0.0, rtol=0.0))
    assert _one(obtained, expected, Tolerance(atol=out.required_atol, rtol=0.0))[1].passed
    assert _one(obtained, expected, Tolerance(atol=0.0, rtol=out.required_rtol))[1].passed
    assert out.max_abs >= out.median_abs >= 0.0


@pytest.mark.parametrize("mode", ["elemwise", "median", "quantile", "isclose"])
def test_chunked_statistics_equal_the_direct_formulas(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The statistics are computed a chunk at a time in two passes (abs, then rel, in one scratch array: issue 31);
    over two iterations, with chunks that end inside each, they equal the whole-array float64 formulas."""
    monkeypatch.setattr("harness.judge.elementwise.DIFF_CHUNK", 7)
    rng = np.random.default_rng(3)
    gold = [rng.standard_normal(40).astype(np.float32), rng.standard_normal(33).astype(np.float32)]
    gold[0][5] = 0.0
    got = [(g + rng.standard_normal(g.size).astype(np.float32) * 0.01).astype(np.float16) for g in gold]
    tol = Tolerance(atol=5e-3, rtol=5e-3, mode=mode, quantile=0.9)  # type: ignore[arg-type]
    out = compare_iterations([{"y": a} for a in got], [{"y": b} for b in gold], tolerances={}, default=tol).outputs[0]
    a = np.concatenate(got).astype(np.float64)
    b = np.concatenate(gold).astype(np.float64)
    abs_err = np.abs(a - b)
    rel_err = abs_err / np.where(b == 0, 2.220446049250313e-16, np.abs(b))
    assert (out.max_abs, out.mean_abs, out.median_abs) == (abs_err.max(), abs_err.mean(), np.median(abs_err))
    assert (out.max_rel, out.mean_rel, out.median_rel) == (rel_err.max(), rel_err.mean(), np.median(rel_err))
    assert (out.quantile_abs, out.quantile_rel) == (np.quantile(abs_err, 0.9), np.quantile(rel_err, 0.9))
    over = abs_err > 5e-3 + 5e-3 * np.abs(b) if mode == "isclose" else (abs_err > 5e-3) & (rel_err > 5e-3)
    assert out.n_over == int(over.sum()) > 0 and out.n_total == 73


@pytest.mark.parametrize("mode", ["elemwise", "max", "mean", "median", "quantile", "isclose"])
def test_the_verdict_only_comparison_gives_the_same_verdict_and_maxima(mode: str) -> None:
    """``full=False`` (the diagnosis's and tune's candidate runs): the same pass/fail, reason, counts and max errors
    as the full comparison, NaN/inf pairs included, without the statistics the verdict does not read."""
    rng = np.random.default_rng(5)
    gold = rng.standard_normal((3, 1100)).astype(np.float32)
    got = (gold + rng.standard_normal(gold.shape).astype(np.float32) * 2e-3).astype(np.float16)
    got[0, 3], gold[1, 4], got[1, 4], gold[2, 0] = np.nan, np.inf, np.inf, 0.0
    for tol in (
        Tolerance(atol=4e-3, rtol=4e-3, mode=mode),
        Tolerance(atol=1e-2, rtol=1e-2, mode=mode, nan_equal=False),
    ):  # type: ignore[arg-type]
        kwargs = {"tolerances": {}, "default": tol}
        full = compare_iterations([{"logits": got}], [{"logits": gold}], **kwargs).outputs[0]  # type: ignore[arg-type]
        quick = compare_iterations([{"logits": got}], [{"logits": gold}], full=False, **kwargs).outputs[0]  # type: ignore[arg-type]
        same = ("passed", "reason", "n_over", "n_total", "max_abs", "max_rel", "required_atol", "required_rtol")
        assert [getattr(quick, f) for f in same] == [getattr(full, f) for f in same]
        assert full.top1_agreement is not None and quick.top1_agreement is None  # no rule on it: not computed


def test_chunks_equal_to_the_golden_are_not_computed_and_give_what_computing_them_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FP32 against its golden: equal chunks take no arithmetic; a chunk that differs, an infinity the tolerance
    does not let match, and NaN still do, with the same figures as before."""
    monkeypatch.setattr(elementwise, "DIFF_CHUNK", 100)
    computed: list[int] = []
    real = elementwise._chunk

    def counting(a: np.ndarray, b: np.ndarray, tol: Tolerance, *, count: bool = True) -> object:
        computed.append(a.size)
        return real(a, b, tol, count=count)

    monkeypatch.setattr(elementwise, "_chunk", counting)
    gold = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    same = elementwise.element_errors([(gold.copy(), gold)], Tolerance())
    assert computed == [] and same.abs == (0.0, 0.0, 0.0, 0.0) and same.rel == (0.0, 0.0, 0.0, 0.0)
    assert (same.over, same.mismatch, same.total) == (0, 0, 1000)
    got = gold.copy()
    got[950] += 1.0  # the last chunk differs
    late = elementwise.element_errors([(got, gold)], Tolerance())
    assert computed and computed == [100] * len(computed)  # that chunk alone, in every pass
    assert late.abs[0] == np.float64(got[950]) - np.float64(gold[950]) and late.over == 1
    with_inf = gold.copy()
    with_inf[5] = np.inf
    computed.clear()
    strict = elementwise.element_errors([(with_inf.copy(), with_inf)], Tolerance(inf_equal=False))
    assert computed and strict.mismatch == 1  # an infinity equal to itself is an error when inf_equal is off
    computed.clear()
    with_nan = gold.copy()
    with_nan[5] = np.nan
    assert elementwise.element_errors([(with_nan.copy(), with_nan)], Tolerance()).mismatch == 0 and computed
