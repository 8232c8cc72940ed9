"""Pure comparison of runner outputs with golden outputs.

Semantics (Polygraphy-compatible, see ``docs/ARCHITECTURE.md``):

* Everything is compared in float64 after exact widening (fp16/bf16 -> fp32 is exact, fp32 -> fp64 too);
  bool outputs are compared as 0/1.
* ``abs = |obtained - expected|`` and ``rel = abs / |expected|``; where ``expected`` is 0 the denominator is
  ``2.22e-16`` (Polygraphy's epsilon), so a non-zero difference there has a huge relative error.
* Modes ``elemwise`` / ``max`` / ``mean`` / ``median`` / ``quantile``: an element (or the statistic) fails only
  when it is over ``atol`` AND over ``rtol`` (Polygraphy's OR across tolerances). ``isclose`` is numpy's
  ``|a - b| <= atol + rtol * |expected|`` per element.
* NaN/inf policy, applied in every mode (a median never hides them): where the golden itself is NaN, a NaN in
  the obtained output matches it (``nan_equal=True``, the default: the golden says the model is undefined there,
  and a rerun of an unchanged NaN golden is not a change; ``nan_equal = false`` in a tolerance table makes any NaN
  a failure); +inf matches +inf (and -inf matches -inf) only with ``inf_equal=True``; every other non-finite
  pairing, such as a NaN where the golden is finite, is a mismatch whose abs/rel error is ``inf``.
* A missing or extra output, a shape change, or a change of dtype kind (float vs int vs bool) is a failure.
  A float output may change precision (fp32 golden vs fp16 obtained): that precision is what is under test.
* ``required_atol`` / ``required_rtol`` are the tolerances that would have passed, each on its own
  (for ``elemwise`` and ``isclose`` the max errors, for stat modes the statistic); ``inf`` when nothing would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from harness.judge.elementwise import ElementErrors, dtype_kind, element_errors, top_k_hits
from harness.judge.tolerances import MODES, Mode, Tolerance
from harness.judge.vocab import VocabFigures, is_vocabulary, vocab_figures

__all__ = [
    "MODES",
    "CompareResult",
    "ErrorFigures",
    "Mode",
    "OutputComparison",
    "Tolerance",
    "compare_iterations",
    "compare_outputs",
]


@dataclass(frozen=True)
class ErrorFigures:
    """The error statistics of one output over all iterations: what both the verdict and the report carry."""

    name: str
    passed: bool
    reason: str
    max_abs: float
    mean_abs: float
    median_abs: float
    quantile_abs: float
    max_rel: float
    mean_rel: float
    median_rel: float
    quantile_rel: float
    n_over: int
    n_total: int


@dataclass(frozen=True)
class OutputComparison(ErrorFigures):
    """The verdict and statistics for one output (over all iterations)."""

    required_atol: float
    required_rtol: float
    top_k_agreement: float | None
    tolerance: Tolerance = Tolerance()
    top1_agreement: float | None = None
    """Logits only (:mod:`harness.judge.vocab`): fraction of positions keeping the golden's argmax token."""
    kl_mean: float | None = None
    """Logits only: mean KL(softmax(golden) || softmax(obtained)) per position, nats."""

    def __bool__(self) -> bool:
        return self.passed


@dataclass(frozen=True)
class CompareResult:
    """All outputs of one comparison. Truthy when everything passed."""

    outputs: tuple[OutputComparison, ...]
    missing: tuple[str, ...]
    extra: tuple[str, ...]
    passed: bool
    problems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.passed

    def summary(self) -> str:
        """One line per failing item (or per output when everything passed)."""
        lines = [f"missing output {name!r} (in the golden, not produced)" for name in self.missing]
        lines += [f"extra output {name!r} (produced, not in the golden)" for name in self.extra]
        lines += list(self.problems)
        for out in self.outputs:
            if out.passed and not self.passed:
                continue
            lines.append(_describe_output(out))
        return "\n".join(lines)


def _describe_output(out: OutputComparison) -> str:
    status = "ok" if out.passed else "FAIL"
    head = f"output {out.name!r} {status}: {out.reason}"
    if out.n_total == 0 or math.isnan(out.max_abs):
        return head
    pct = 100.0 * out.n_over / out.n_total
    text = (
        f"{head}\n    {out.n_over}/{out.n_total} ({pct:.2f}%) elements outside {out.tolerance.describe()}; "
        f"abs max={out.max_abs:.3g} mean={out.mean_abs:.3g} median={out.median_abs:.3g}; "
        f"rel max={out.max_rel:.3g} median={out.median_rel:.3g}; "
        f"would pass with atol>={out.required_atol:.3g} or rtol>={out.required_rtol:.3g}"
    )
    if out.top_k_agreement is not None:
        text += f"; top-{out.tolerance.top_k} agreement {out.top_k_agreement:.3f}"
    if out.top1_agreement is not None:
        text += f"; top-1 token agreement {out.top1_agreement:.4f}, mean KL {out.kl_mean:.3g}"
    return text


def _judge(name: str, errors: ElementErrors, tol: Tolerance, top_k: tuple[int, int] | None) -> OutputComparison:
    max_a, mean_a, med_a, q_a = errors.abs
    max_r, mean_r, med_r, q_r = errors.rel
    n_over, n_mismatch = errors.over, errors.mismatch
    stat_by_mode = {"max": (max_a, max_r), "mean": (mean_a, mean_r), "median": (med_a, med_r), "quantile": (q_a, q_r)}
    if tol.mode in stat_by_mode:
        stat_abs, stat_rel = stat_by_mode[tol.mode]
        passed = not (stat_abs > tol.atol and stat_rel > tol.rtol)
        required_atol, required_rtol = stat_abs, stat_rel
        reason = f"{tol.mode} abs={stat_abs:.3g} rel={stat_rel:.3g} vs {tol.describe()}"
    else:
        passed = n_over == 0
        required_atol, required_rtol = max_a, max_r
        reason = f"{n_over} element(s) over tolerance" if n_over else "within tolerance"
    if n_mismatch:
        passed = False
        required_atol = required_rtol = math.inf
        reason = (
            f"{n_mismatch} non-finite mismatch(es) (NaN/inf policy: nan_equal={tol.nan_equal}, "
            f"inf_equal={tol.inf_equal}); " + reason
        )
    agreement = None
    if top_k is not None:
        hits, total = top_k
        agreement = hits / total if total else 0.0
        if agreement < tol.min_top_k_agreement:
            passed = False
            reason += f"; top-{tol.top_k} agreement {agreement:.3f} < {tol.min_top_k_agreement:.3f}"
    return OutputComparison(
        name=name,
        passed=passed,
        reason=reason,
        max_abs=max_a,
        mean_abs=mean_a,
        median_abs=med_a,
        quantile_abs=q_a,
        max_rel=max_r,
        mean_rel=mean_r,
        median_rel=med_r,
        quantile_rel=q_r,
        n_over=n_over,
        n_total=errors.total,
        required_atol=required_atol,
        required_rtol=required_rtol,
        top_k_agreement=agreement,
        tolerance=tol,
    )


def _with_vocab(out: OutputComparison, figures: VocabFigures) -> OutputComparison:
    """``out`` with its logits figures, failed where the tolerance's ``min_top1_agreement``/``max_kl`` say so."""
    tol, top1, kl = out.tolerance, figures.top1, figures.kl_mean
    passed, reason = out.passed, out.reason
    if tol.min_top1_agreement is not None and top1 is not None and top1 < tol.min_top1_agreement:
        passed, reason = False, reason + f"; top-1 token agreement {top1:.4f} < {tol.min_top1_agreement:g}"
    if tol.max_kl is not None and kl is not None and not kl <= tol.max_kl:
        passed, reason = False, reason + f"; mean KL {kl:.3g} > {tol.max_kl:g}"
    return replace(out, top1_agreement=top1, kl_mean=kl, passed=passed, reason=reason)


def _structural_failure(name: str, reason: str, tol: Tolerance) -> OutputComparison:
    nan = math.nan
    return OutputComparison(
        name=name,
        passed=False,
        reason=reason,
        max_abs=nan,
        mean_abs=nan,
        median_abs=nan,
        quantile_abs=nan,
        max_rel=nan,
        mean_rel=nan,
        median_rel=nan,
        quantile_rel=nan,
        n_over=0,
        n_total=0,
        required_atol=math.inf,
        required_rtol=math.inf,
        top_k_agreement=None,
        tolerance=tol,
    )


def _structure_problem(obtained: np.ndarray, expected: np.ndarray) -> str | None:
    if obtained.shape != expected.shape:
        return f"shape changed: golden {tuple(expected.shape)}, obtained {tuple(obtained.shape)}"
    if dtype_kind(obtained.dtype) != dtype_kind(expected.dtype):
        return f"dtype changed: golden {expected.dtype}, obtained {obtained.dtype}"
    return None


def compare_iterations(
    obtained: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Mapping[str, np.ndarray]],
    *,
    tolerances: Mapping[str, Tolerance],
    default: Tolerance,
    full: bool = True,
) -> CompareResult:
    """Compare every iteration; statistics per output are over all iterations together. ``full=False``: only what
    the verdict needs, for callers that read nothing else (the diagnosis's and tune's candidate runs): the mean,
    median and quantile only in their own modes (else NaN), the logits figures only with a rule on them."""
    problems: list[str] = []
    if len(obtained) != len(expected):
        problems.append(f"iteration count changed: golden {len(expected)}, obtained {len(obtained)}")
    unknown = sorted(set(tolerances) - {n for it in expected for n in it})
    if unknown:
        raise ValueError(f"tolerances given for outputs not in the golden: {unknown}")
    names = list(dict.fromkeys(n for it in expected for n in it))
    got_names = list(dict.fromkeys(n for it in obtained for n in it))
    missing = tuple(n for n in names if n not in got_names)
    extra = tuple(n for n in got_names if n not in names)
    outputs: list[OutputComparison] = []
    for name in (n for n in names if n not in missing):
        tol = tolerances.get(name, default)
        pairs: list[tuple[np.ndarray, np.ndarray]] = []
        hits = total = 0
        broken = None
        vocab: VocabFigures | None = None
        for index, (got_it, exp_it) in enumerate(zip(obtained, expected)):
            if name not in got_it or name not in exp_it:
                broken = f"present in some iterations only (iteration {index})"
                break
            got, exp = np.asarray(got_it[name]), np.asarray(exp_it[name])
            broken = _structure_problem(got, exp)
            if broken:
                break
            pairs.append((got, exp))
            rules = tol.min_top1_agreement is not None or tol.max_kl is not None
            if (full or rules) and is_vocabulary(name, exp, vocab=tol.vocab):
                vocab = vocab_figures(got, exp) + (vocab or VocabFigures())
            if tol.top_k is not None:
                h, t = top_k_hits(got, exp, tol.top_k)
                hits, total = hits + h, total + t
        if broken:
            outputs.append(_structural_failure(name, broken, tol))
        else:
            judged = _judge(
                name, element_errors(pairs, tol, full=full), tol, (hits, total) if tol.top_k is not None else None
            )
            outputs.append(judged if vocab is None else _with_vocab(judged, vocab))
    passed = not missing and not extra and not problems and all(o.passed for o in outputs)
    return CompareResult(outputs=tuple(outputs), missing=missing, extra=extra, passed=passed, problems=tuple(problems))


def compare_outputs(
    obtained: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    *,
    tolerances: Mapping[str, Tolerance],
    default: Tolerance,
) -> CompareResult:
    """Compare one iteration's outputs with the golden's."""
    return compare_iterations([obtained], [expected], tolerances=tolerances, default=default)
