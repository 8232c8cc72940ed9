"""One tensor's verdict in the divergence profile (:mod:`harness.diagnose.profile`): from the figures and counts
the side-by-side graph computed for it (:func:`judge_figures`), or from both versions fetched whole
(:func:`judge_raw`), the same verdict :func:`harness.judge.paired.judge_outputs` gives the whole tensor."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness.diagnose.pair import ModelPair
from harness.judge.compare import OutputComparison
from harness.judge.paired import judge_outputs
from harness.tune.bound import error_and_scale, scaled

Judged = tuple[float, bool, float, float, float, int | None, int]
"""(scaled error, passed, max_abs, max_rel, max finite |FP32|, differing positions (exact tensors), elements)."""


def judge_figures(pair: ModelPair, name: str, measured: tuple[np.ndarray, np.ndarray], *, exact: bool) -> Judged:
    """The verdict :func:`judge_outputs` gives, from the in-graph figures and counts of every run (see sidebyside)."""
    figures, counts = measured
    present = counts[:, 3] > 0
    figures = np.where(present[:, None], figures, 0.0)
    scale = float(figures[:, 0].max(initial=0.0))
    elements = int(counts[:, 3].sum())
    mismatch, badpos = elements - int(counts[:, 0].sum()), int(counts[:, 2].sum() - counts[:, 1].sum())
    finite_abs = float(figures[:, 1].max(initial=0.0))
    error = math.inf if badpos else scaled(finite_abs, scale)
    if exact:
        return error, mismatch == 0, finite_abs, float(figures[:, 2].max(initial=0.0)), scale, mismatch, elements
    max_abs = math.inf if mismatch else finite_abs
    max_rel = math.inf if mismatch else float(figures[:, 2].max(initial=0.0))
    tol = pair.tolerance(name, np.array([scale]))
    if tol.mode == "max":
        passed = not (max_abs > tol.atol and max_rel > tol.rtol)
    elif tol.mode == "isclose":
        passed = not float(figures[:, 4].max(initial=-math.inf)) > tol.atol
    else:
        passed = not float(figures[:, 3].max(initial=0.0)) > tol.atol
    return error, passed and not mismatch, max_abs, max_rel, scale, None, elements


def judge_verdict(out: OutputComparison, gold: Sequence[np.ndarray]) -> Judged | None:
    """A graph output's row from the case's own verdict on it (its obtained outputs against ``gold``, under the
    pair's policy), where the verdict holds all of it: a compared float output whose golden is all finite (its
    ``max_abs`` is then the max |obtained - golden| that :func:`judge_raw`'s scaled error reads). None otherwise."""
    if out.n_total == 0 or math.isnan(out.max_abs) or not all(g.dtype.kind == "f" for g in gold):
        return None
    scale = 0.0
    for g in (g for g in gold if g.size):
        with np.errstate(invalid="ignore"):
            top, bottom = float(g.max()), float(g.min())
        if not (math.isfinite(top) and math.isfinite(bottom)):
            return None
        scale = max(scale, top, -bottom)
    return (
        scaled(out.max_abs, scale),
        bool(out.passed),
        float(out.max_abs),
        float(out.max_rel),
        scale,
        None,
        out.n_total,
    )


def judge_raw(pair: ModelPair, name: str, got: Sequence[np.ndarray], gold: Sequence[np.ndarray]) -> Judged | None:
    """Tensors fetched whole (or the case's own outputs): floats through the judge (the verdict and maxima, a
    chunk at a time), integers and bools exactly, others (strings) not at all."""
    elements = sum(int(g.size) for g in gold)
    if all(g.dtype.kind in "biu" for g in gold):  # exact: every differing position counts
        differing = sum(
            int(np.count_nonzero(np.asarray(a) != g)) if a.shape == g.shape else g.size for a, g in zip(got, gold)
        )
        bad = float(differing > 0)
        return bad, differing == 0, bad, bad, 0.0, differing, elements
    if not all(np.issubdtype(g.dtype, np.floating) for g in gold):
        return None
    verdict = judge_outputs(
        [{name: g} for g in got], [{name: g} for g in gold], precision=pair.precision, policy=pair.policy, full=False
    )
    (figures,) = verdict.outputs
    diff, scale = error_and_scale(zip(got, gold))
    return scaled(diff, scale), bool(verdict), float(figures.max_abs), float(figures.max_rel), scale, None, elements
