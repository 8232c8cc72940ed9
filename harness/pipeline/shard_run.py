"""What a shard records about itself so that ``castguard merge`` can check and complete the night. No pytest here.

A shard (``pytest --shard K/N``) writes :class:`~harness.report.model.ShardInfo` into its run folder as soon as
it starts (``runs/<id>/shard.json``, :meth:`harness.report.collect.ReportSession.mark_shard`) and again in its
``report.json`` when it ends. It holds the whole assignment (every model key, the cases per model) so that a
merge knows which shards and cases to expect, this shard's part of it, and what every shard must agree on:

* :func:`shard_settings`: the sweep axis by axis, the tolerances, the inputs and the ORT providers;
* :func:`golden_digests`: every golden in the goldens folder (its ``.npz`` path and the sha256 its sidecar
  names), read from the small sidecars only.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.config import HarnessConfig
from harness.core.files import sha256_file
from harness.report.model import ShardInfo
from harness.report.provenance import utc_now
from harness.sweep.shards import ShardWork


def shard_settings(config: HarnessConfig) -> tuple[tuple[str, str], ...]:
    """(name, value) pairs every shard of one night must share (shown side by side when they differ)."""
    sweep = tuple(
        (f"sweep {field.name}", repr(getattr(config.sweep, field.name))) for field in dataclasses.fields(config.sweep)
    )
    inputs = (
        f"file sha256 {sha256_file(config.inputs_file)}"
        if config.inputs_file is not None
        else f"seed {config.seed}, iterations {config.iterations}, val ranges {config.val_ranges!r}, "
        f"input shapes {config.input_shapes!r}"
    )
    for key, path in config.model_inputs:
        inputs += f"; {key}: file sha256 {sha256_file(path)}"
    return (
        *sweep,
        ("tune", str(config.tune)),
        ("tolerances", repr(config.tolerances)),
        ("inputs", inputs),
        ("ort providers", ",".join(config.ort_providers)),
    )


def golden_digests(goldens_dir: Path) -> tuple[tuple[str, str], ...]:
    """``(model/recipe.npz, npz sha256)`` for every golden sidecar in the folder; unreadable ones say so."""
    found = []
    for sidecar in sorted(goldens_dir.glob("*/*.json")) if goldens_dir.is_dir() else []:
        try:
            digest = json.loads(sidecar.read_text(encoding="utf-8")).get("npz_sha256")
        except (OSError, ValueError, AttributeError):
            digest = None
        found.append(
            (
                sidecar.with_suffix(".npz").relative_to(goldens_dir).as_posix(),
                digest if isinstance(digest, str) else "unreadable sidecar",
            )
        )
    return tuple(found)


def shard_info(config: HarnessConfig, work: ShardWork) -> ShardInfo:
    """The record a shard writes when it starts (its exit status is filled in when it ends)."""
    return ShardInfo(
        part=work, settings=shard_settings(config), goldens=golden_digests(config.goldens_dir), started=utc_now()
    )


@dataclass
class ShardState:
    """This process's shard: its work, its start record, the non-case tests that failed (for the merge)."""

    work: ShardWork
    info: ShardInfo
    failed_tests: list[str] = field(default_factory=list)

    def finished(self, exit_status: int) -> ShardInfo:
        """The start record with how the shard ended (for its report.json)."""
        return replace(self.info, exit_status=exit_status, failed_tests=tuple(dict.fromkeys(self.failed_tests)))
