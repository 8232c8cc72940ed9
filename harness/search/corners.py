"""A deterministic hunt for the inputs that push tensors to their range limit: the corners of the input box.

Low-precision overflow is a worst case over the inputs, and the worst case of a linear layer sits at a corner of
the box: ``|sum_i x_i w_ij|`` over ``x`` in ``[lo, hi]^n`` peaks where every ``x_i`` is at the bound that the
sign of ``w_ij`` points to. Random draws essentially never land there (one corner of ``2^n`` per column), so
sampling misses the overflow of a plain ``x @ w -> square -> mean`` head. Here:

1. :func:`slopes`: from the centre of the box, one run per *block* of input coordinates (the block moved to its
   upper bound) gives each watched element's slope along it. A block is a single coordinate while the float
   inputs hold at most ``max_probes`` coordinates in all, which makes the slopes exact for a linear layer
   (a finite difference of a linear map); larger inputs are split into ``max_probes`` contiguous blocks.
2. :func:`corner_feeds`: per watched element, the sign-gradient step: every block to the bound its slope points
   to, toward the element's largest and its smallest value. The linear extrapolation predicts the peak
   ``|value|``; the corners of the highest predicted peaks come first (for a linear layer, ``x = sign(w[:, j])``
   scaled to the box, for the column ``j`` of largest ``sum |w[:, j]|``: found every time, from any seed).
3. :func:`ascend`: coordinate ascent from a feed: move one block at a time to the opposite bound while a score
   (the caller's: error over bound, peak over the type's max) grows, within a number of evaluations.

Nothing here runs a model: the caller passes ``probe`` (a feed to the watched values, flattened) and ``score``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.data.feeds import Feed

Probe = Callable[[Feed], np.ndarray]
MAX_PROBES = 256
_MAX_SLOPE_VALUES = 8_000_000  # blocks x watched elements kept in memory (float32); more: a strided subset


@dataclass(frozen=True)
class Block:
    """Coordinates of one input that move together (flat indices into the input)."""

    input: str
    index: np.ndarray


@dataclass(frozen=True)
class Box:
    """The input domain: per float input ``(name, lo, hi)``; ``base`` gives every input's shape and dtype and the
    values of the inputs without a range (integer ids, masks). ``max_probes``: the blocks the inputs are split into
    at most (each coordinate its own block when they hold no more)."""

    ranges: tuple[tuple[str, float, float], ...]
    base: Feed
    max_probes: int = MAX_PROBES

    def bounds(self, name: str) -> tuple[float, float]:
        return next((lo, hi) for n, lo, hi in self.ranges if n == name)

    def centre(self) -> Feed:
        feed = {k: np.array(v, copy=True) for k, v in self.base.items()}
        for name, lo, hi in self.ranges:
            feed[name] = np.full_like(feed[name], (lo + hi) / 2)
        return feed

    def blocks(self) -> list[Block]:
        max_probes = self.max_probes
        sizes = {name: int(self.base[name].size) for name, _, _ in self.ranges}
        total = sum(sizes.values())
        found: list[Block] = []
        for name, size in sizes.items():
            if size == 0:
                continue
            parts = size if total <= max_probes else max(1, (size * max_probes) // max(total, 1))
            found += [Block(name, part) for part in np.array_split(np.arange(size), parts)]
        return found


def _moved(feed: Feed, block: Block, value: float) -> Feed:
    out = dict(feed)
    flat = np.array(feed[block.input], copy=True).reshape(-1)
    flat[block.index] = value
    out[block.input] = flat.reshape(feed[block.input].shape)
    return out


@dataclass(frozen=True)
class Slopes:
    blocks: tuple[Block, ...]
    centre: np.ndarray  # watched values at the centre (the kept subset)
    delta: np.ndarray  # [blocks, elements]: change when the block moves centre -> hi
    elements: np.ndarray  # which watched elements were kept (flat indices)


def slopes(probe: Probe, box: Box) -> Slopes:
    """One probe at the centre and one per block; see the module docstring."""
    centre = box.centre()
    v0 = np.nan_to_num(np.asarray(probe(centre), dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    blocks = tuple(box.blocks())
    keep = np.arange(v0.size)
    if blocks and v0.size * len(blocks) > _MAX_SLOPE_VALUES:
        keep = np.linspace(0, v0.size - 1, _MAX_SLOPE_VALUES // len(blocks)).astype(np.int64)
    delta = np.zeros((len(blocks), keep.size), dtype=np.float32)
    for row, block in enumerate(blocks):
        moved = np.asarray(probe(_moved(centre, block, box.bounds(block.input)[1])), dtype=np.float64)
        delta[row] = np.nan_to_num(moved[keep] - v0[keep], nan=0.0, posinf=0.0, neginf=0.0)
    return Slopes(blocks=blocks, centre=v0[keep], delta=delta, elements=keep)


def corner_feeds(probe: Probe, box: Box, *, top: int = 8) -> list[Feed]:
    """Up to ``top`` distinct corners, highest predicted peak ``|value|`` first (see the module docstring)."""
    found = slopes(probe, box)
    if not found.blocks or found.elements.size == 0:
        return []
    reach = np.abs(found.delta).astype(np.float64).sum(axis=0)  # moving each block to the bound it points to
    upper, lower = found.centre + reach, found.centre - reach
    peak = np.maximum(np.abs(upper), np.abs(lower))
    centre = box.centre()
    corners: list[Feed] = []
    seen: set[bytes] = set()
    for element in np.argsort(-peak, kind="stable"):
        if len(corners) >= top or peak[element] <= 0:
            break
        direction = 1.0 if abs(upper[element]) >= abs(lower[element]) else -1.0
        up = direction * found.delta[:, element] > 0
        key = np.packbits(up).tobytes() + np.packbits(found.delta[:, element] != 0).tobytes()
        if key in seen:
            continue
        seen.add(key)
        feed = centre
        for block, to_hi, slope in zip(found.blocks, up, found.delta[:, element]):
            if slope != 0:
                lo, hi = box.bounds(block.input)
                feed = _moved(feed, block, hi if to_hi else lo)
        corners.append(feed)
    return corners


def ascend(
    score: Callable[[Feed], float],
    start: Feed,
    box: Box,
    *,
    max_evals: int = 32,
    stop: Callable[[float], bool] | None = None,
) -> tuple[Feed, float, int]:
    """Coordinate ascent: move one block at a time to the opposite bound (a block off the bounds goes to the
    farther one), keep the move when ``score`` grows; at most ``max_evals`` scores, or until ``stop(score)``.
    Returns the best feed, its score and the evaluations spent."""
    best, best_score, spent = start, score(start), 1
    blocks: Sequence[Block] = box.blocks()
    improved = True
    while improved and spent < max_evals and not (stop is not None and stop(best_score)):
        improved = False
        for block in blocks:
            if spent >= max_evals or (stop is not None and stop(best_score)):
                break
            lo, hi = box.bounds(block.input)
            now = float(np.asarray(best[block.input], dtype=np.float64).reshape(-1)[block.index].mean())
            target = lo if now - lo > hi - now else hi
            trial = _moved(best, block, target)
            value = score(trial)
            spent += 1
            if value > best_score:
                best, best_score, improved = trial, value, True
    return best, best_score, spent
