"""Shard report folders as ``pytest --shard K/N`` writes them, made by hand (no pytest run): for the merge's tests."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.report.collect import ReportSession
from harness.report.model import Provenance, ShardInfo
from harness.report.serde import report_to_dict
from harness.sweep import SweepSpec, expand
from harness.sweep.shards import Shard, assign
from tests.helpers.report_samples import PROVENANCE, record_for

CASES = expand(SweepSpec(precisions=("fp16",), data_max=(8.0, 512.0), exclusions=SweepSpec().exclusions[:1]))
IDS = tuple(c.id for c in CASES)
MODELS = ("alpha", "beta")


def info(
    index: int, *, count: int = 2, models: tuple[str, ...] = MODELS, exit_status: int | None = 0, **changes: object
) -> ShardInfo:
    base = ShardInfo(
        part=assign(models, IDS, Shard(index, count)),
        settings=(("sweep precisions", "('fp16',)"),),
        goldens=((f"{MODELS[index - 1]}/seed0.npz", "ab" * 32), ("shared/seed0.npz", "cd" * 32)),
        started="2026-11-24T03:17:00+00:00",
        exit_status=exit_status,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def shard(
    folder: Path,
    shard_info: ShardInfo,
    *,
    provenance: Provenance = PROVENANCE,
    cases: int | None = None,
    finished: bool = True,
    interrupted: bool = False,
) -> Path:
    """A shard's report folder as pytest --shard writes it (finished, or killed after ``cases`` cases)."""
    session = ReportSession(report_dir=folder)
    session.mark_shard(dataclasses.replace(shard_info, exit_status=None), provenance=provenance)
    model = shard_info.part.work[0][0] if shard_info.part.work else "alpha"
    for case in CASES[: len(CASES) if cases is None else cases]:
        session.add(record_for(case, model=model))
    if finished:
        report = session.build(provenance=provenance, interrupted=interrupted, shard=shard_info)
        assert report is not None  # only report.json: the merge reads nothing else (no plots drawn)
        (session.run_dir / "report.json").write_text(json.dumps(report_to_dict(report)))
        session.close()
    return folder
