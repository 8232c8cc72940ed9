"""Which part of the sweep one machine runs: ``--shard K/N`` (shard K of N, 1-based). No pytest here.

Every shard is given the same models and the same sweep, and each computes the same assignment:

* The models are ordered by the sha256 of their key (:func:`key_digest`: the same on every machine and Python,
  unlike ``hash()``), and dealt round robin: the model at position ``i`` of that order goes to shard
  ``i mod N + 1``. A model's golden, magnitudes and conversions then stay on one machine, and shards differ by
  at most one model (50 models on 4 shards: 13, 13, 12, 12).
* Only with fewer models than shards are a model's cases split too: shard positions are dealt to the models
  the same way (position ``p`` serves the model at ``p mod M``), and a model's cases, in sweep order, are dealt
  round robin among its shards. A shard left without a case (more shards than cases) has no work: it passes.

Adding or removing a model can move others to another shard; that costs only cache hits (the cache is keyed
by content). :func:`assign` returns this shard's :class:`ShardWork`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from harness.core.errors import UserError

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*\Z")


@dataclass(frozen=True, order=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based: ``2/4`` is the second of four)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"{self.index}/{self.count} is not a shard: K must be 1..N")

    @property
    def text(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: object, *, where: str = "--shard") -> Shard:
    """``"2/4"`` -> ``Shard(2, 4)``; anything else (``0/4``, ``5/4``, ``x``) is one UserError naming it."""
    found = _SHARD.match(text) if isinstance(text, str) else None
    if found is None or not 1 <= int(found[1]) <= int(found[2]):
        raise UserError(
            where=f"{where} {text!r}",
            problem="is not a shard K/N with 1 <= K <= N",
            fix="write it as K/N, e.g. --shard 2/4 (the second of four shards)",
        )
    return Shard(int(found[1]), int(found[2]))


def key_digest(key: str) -> str:
    """sha256 of the model key (UTF-8): the order models are dealt to shards in."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def hash_order(keys: Sequence[str]) -> tuple[str, ...]:
    """The keys sorted by :func:`key_digest` (ties, which sha256 does not produce, by key)."""
    return tuple(sorted(keys, key=lambda key: (key_digest(key), key)))


@dataclass(frozen=True)
class ShardWork:
    """What one shard runs: for each of its models (in the given model order), the case ids it runs."""

    shard: Shard
    models: tuple[str, ...]  # every model key of the sweep, as given
    work: tuple[tuple[str, tuple[str, ...]], ...]  # (model, its case ids on this shard)
    cases_per_model: int  # the sweep's cases per model

    @property
    def split(self) -> bool:
        """Fewer models than shards: a model's cases are spread over several shards."""
        return 0 < len(self.models) < self.shard.count

    @property
    def assigned_models(self) -> tuple[str, ...]:
        return tuple(model for model, _ in self.work)

    @property
    def case_count(self) -> int:
        return sum(len(ids) for _, ids in self.work)

    @property
    def total_cases(self) -> int:
        return len(self.models) * self.cases_per_model

    def runs(self, model: str, case_id: str) -> bool:
        return any(model == m and case_id in ids for m, ids in self.work)

    def summary(self) -> str:
        """``shard 2/4: 13 of 50 models, 156 cases`` (what the terminal summary prints)."""
        head = f"shard {self.shard.text}: "
        if not self.work:
            return (
                head + f"no work (0 of {len(self.models)} models, 0 of {self.total_cases} cases: more shards "
                "than work); nothing to run, the shard passes"
            )
        models = f"{len(self.work)} of {len(self.models)} models"
        if self.split:
            models += (
                f" ({self.case_count} of its {self.cases_per_model}: fewer models than shards, so the cases are split)"
            )
        return head + f"{models}, {self.case_count} case{'s' if self.case_count != 1 else ''}"


def assign(models: Sequence[str], case_ids: Sequence[str], shard: Shard) -> ShardWork:
    """This shard's part of the sweep ``models x case_ids`` (see the module docstring)."""
    if len(set(models)) != len(models):
        raise ValueError(f"model keys repeat: {sorted(models)}")
    order, count, position = hash_order(models), shard.count, shard.index - 1
    work: list[tuple[str, tuple[str, ...]]] = []
    if len(order) >= count:
        mine = set(order[position::count])
        work = [(model, tuple(case_ids)) for model in models if model in mine]
    elif order:
        at = position % len(order)
        positions = list(range(at, count, len(order)))  # this model's shard positions
        nth, of = positions.index(position), len(positions)
        ids = tuple(case for i, case in enumerate(case_ids) if i % of == nth)
        work = [(order[at], ids)] if ids else []
    return ShardWork(shard=shard, models=tuple(models), work=tuple(work), cases_per_model=len(case_ids))
