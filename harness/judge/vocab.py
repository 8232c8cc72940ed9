"""Judging an output whose last axis is a vocabulary (a language model's logits) the way LLM people do.

Beside the error statistics, such an output gets, over every position (all axes but the last) of every iteration:

- top-1 agreement: the fraction of positions whose argmax token is the golden's (a NaN counts as -inf);
- mean KL divergence KL(softmax(golden) || softmax(obtained)) in nats, computed in float64 with log-sum-exp
  (inf where the obtained row is not finite where the golden's is).

Which outputs: a float output of rank >= 2 whose last axis has at least :data:`MIN_VOCAB` entries and whose name
says logits (contains "logit"), or any output whose tolerance sets ``vocab = true`` (``vocab = false`` turns the
detection off). Rules: ``min_top1_agreement`` and ``max_kl`` in ``[tool.castguard.tolerances]`` fail a case below
or above them; the nightly rules read the figures from report.json. Rows are reduced a chunk at a time, so the
float64 copies never exceed :data:`CHUNK_ELEMENTS` elements (whole rows; one row at the least), whatever the
vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_VOCAB = 1000
CHUNK_ELEMENTS = 1 << 20
"""Elements of the rows reduced at a time (8 MB a float64 temporary: 32 rows of a 32000-token vocabulary)."""


def is_vocabulary(name: str, golden: np.ndarray, *, vocab: bool | None) -> bool:
    """Whether the output ``name`` (its golden ``golden``) is judged as logits (see the module docstring)."""
    if vocab is not None:
        return vocab and golden.ndim >= 1
    floating = golden.dtype.kind == "f" or golden.dtype.name == "bfloat16"
    return floating and golden.ndim >= 2 and golden.shape[-1] >= MIN_VOCAB and "logit" in name.lower()


@dataclass(frozen=True)
class VocabFigures:
    """Sums over positions, so iterations add up: agreeing argmaxes, positions, and the summed KL."""

    hits: int = 0
    rows: int = 0
    kl_sum: float = 0.0

    def __add__(self, other: VocabFigures) -> VocabFigures:
        return VocabFigures(self.hits + other.hits, self.rows + other.rows, self.kl_sum + other.kl_sum)

    @property
    def top1(self) -> float | None:
        return self.hits / self.rows if self.rows else None

    @property
    def kl_mean(self) -> float | None:
        return self.kl_sum / self.rows if self.rows else None


def _log_softmax(x: np.ndarray) -> np.ndarray:
    top = np.max(x, axis=1, keepdims=True)
    shifted = x - np.where(np.isfinite(top), top, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        result: np.ndarray = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return result


def _wide32(rows: np.ndarray) -> np.ndarray:
    """fp16/bf16 rows as float32 (exact); float32 and float64 rows as they are."""
    return rows if rows.dtype in (np.float32, np.float64) else rows.astype(np.float32)


def vocab_figures(obtained: np.ndarray, golden: np.ndarray) -> VocabFigures:
    """Top-1 hits and summed KL over the positions of one iteration (same shapes)."""
    width = golden.shape[-1] if golden.ndim else 1
    got_rows, gold_rows = obtained.reshape(-1, width), golden.reshape(-1, width)
    total = VocabFigures()
    rows = max(1, CHUNK_ELEMENTS // max(width, 1))
    for start in range(0, gold_rows.shape[0], rows):
        gold_part, got_part = (
            _wide32(gold_rows[start : start + rows]),
            _wide32(got_rows[start : start + rows]),
        )
        gold, got = gold_part.astype(np.float64), got_part.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, which says "not finite" below
            diff = np.subtract(gold, got)
            finite = math.isfinite(float(np.add.reduce(diff, axis=None)))  # both finite everywhere
        if finite:
            hits = int((got_part.argmax(axis=1) == gold_part.argmax(axis=1)).sum())
            kl = _finite_kl(gold, got, diff)
        else:  # the argmax in the rows' own float type (widening keeps the order), NaN as -inf
            safe = np.where(np.isnan(got_part), -np.inf, got_part)
            hits = int((safe.argmax(axis=1) == gold_part.argmax(axis=1)).sum())
            kl = _careful_kl(gold, got)
        total = total + VocabFigures(hits, gold.shape[0], float(kl.sum()))
    return total


def _finite_kl(gold: np.ndarray, got: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """Per row, for finite rows: KL = sum p (a - b) - (lse(a) - lse(b)) with p = softmax(a), a = golden, b = obtained,
    ``diff`` = a - b (sum p = 1), in float64: fewer passes and temporaries than two log-softmaxes (0.48 -> 0.23 s
    on 8x512x8000 logits). ``gold`` and ``got`` are overwritten."""
    top_a, top_b = np.max(gold, axis=1, keepdims=True), np.max(got, axis=1, keepdims=True)
    weights = np.exp(np.subtract(gold, top_a, out=gold), out=gold)  # softmax(a) unnormalised
    sum_a = np.sum(weights, axis=1)
    sum_b = np.sum(np.exp(np.subtract(got, top_b, out=got), out=got), axis=1)
    expected = np.einsum("ij,ij->i", weights, diff) / sum_a
    lse_gap = (top_a[:, 0] + np.log(sum_a)) - (top_b[:, 0] + np.log(sum_b))
    kl: np.ndarray = np.maximum(expected - lse_gap, 0.0)  # rounding may give -1e-17
    return kl


def _careful_kl(gold: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Per row, with non-finite values: inf where the obtained row is not finite where the golden's is."""
    log_p, log_q = _log_softmax(gold), _log_softmax(got)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = np.where(log_p > -np.inf, np.exp(log_p) * (log_p - log_q), 0.0)
        kl = np.sum(terms, axis=1)
    result: np.ndarray = np.where(np.isnan(kl), math.inf, np.maximum(kl, 0.0))  # rounding may give -1e-17
    return result
