"""``castguard merge SHARD_DIR... --out DIR``: the shards of one night as one run, judged once. No pytest here.

The shards' cases and saved outputs (:mod:`harness.report.merge`) become one run in ``DIR``. This module holds
what is the merge's own: :class:`ShardNight` (the shards read and checked, their report, their outputs copied,
their notes and lines); :meth:`harness.conductor.CastguardRun.from_night` makes it the run object a ``pytest`` run
has, whose one :meth:`~harness.conductor.CastguardRun.finish` judges and writes it as it does a ``pytest`` run:
``runs/<id>/`` with the outputs and the run's own report, and, when every shard completed, the published
``report.json``/``.md``/``.html`` (so ``castguard recheck DIR`` and ``--baseline DIR`` work on it). ``--baseline``,
``--history`` and ``--fail-on-regression`` are the pytest options (:class:`harness.nightly.run.NightlyRun`): the
comparison and the history entry happen there, once, for the whole night. An incomplete night (a shard missing,
interrupted, killed or failed) is said in the terminal, report.md and report.json, stored in the history marked,
and never a baseline.

Exit status: 0 when the night is complete and every case passed (or failed as expected) with no regression under
``--fail-on-regression``; 1 otherwise (as pytest's 1); 2 for a usage error (shards that do not belong together, a
full ``--out``, a baseline that cannot be read).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from harness.core.errors import UserError
from harness.report import Report, utc_now
from harness.report.collect import ReportSession
from harness.report.merge import Merged, copy_outputs, merge_shards
from harness.report.model import ShardRun

FAILING = ("fail", "error", "xpass")  # a merged case with one of these statuses fails the night


@dataclass(frozen=True)
class ShardNight:
    """The shards of one night, read and checked (:func:`read_night`): what the merged run is made of."""

    merged: Merged

    @property
    def notes(self) -> tuple[str, ...]:
        """Differences between the shards, and the tests outside the sweep cases that failed in one."""
        return (*self.merged.notes, *(f"failed outside the sweep cases: {test}" for test in self.merged.failed_tests))

    def copy_outputs(self, session: ReportSession) -> None:
        """Every shard's saved outputs into the started run's folder; a full or read-only ``--out`` is one
        :class:`UserError` and leaves no half-made run folder."""
        try:
            copy_outputs(self.merged, session.run_dir)
        except UserError:
            session.close()
            shutil.rmtree(session.run_dir, ignore_errors=True)
            raise

    def report(self, *, run_id: str) -> Report:
        """The merged run's report: every shard's cases, how each shard fared, incomplete unless all completed."""
        merged = self.merged
        return Report.build(
            merged.records,
            created=utc_now(),
            provenance=merged.provenance,
            run_id=run_id,
            interrupted=not merged.complete,
            planned_cases=merged.planned_cases,
            shards=merged.shards,
        )

    def exit_status(self) -> int:
        """What the shards' cases alone say (pytest's own status for a whole run): 1 when the night is
        incomplete, a case failed (or passed against its xfail) or a test outside the sweep cases failed."""
        failing = any(r.status in FAILING for r in self.merged.records)
        return int(not self.merged.complete or failing or bool(self.merged.failed_tests))

    def sections(self) -> tuple[str, str]:
        """The merge notes of report.md and report.html (empty without notes)."""
        return _notes_markdown(self.notes), _notes_html(self.notes)

    def terminal_lines(self) -> list[str]:
        """How many shards completed, each shard's state, and the merge notes."""
        merged = self.merged
        return [
            _shards_line(merged),
            *(f"  {_shard_text(s)}" for s in merged.shards),
            *(f"  note: {note}" for note in self.notes),
        ]


def read_night(folders: Sequence[Path], *, out: Path) -> ShardNight:
    """The shard folders read and checked against each other and against ``--out`` (usage errors raise)."""
    merged = merge_shards(folders)
    if out.resolve() in {f.resolve() for f in folders}:
        raise UserError(
            where=f"--out {out}",
            problem="is one of the shard folders",
            fix="write the merged report to a folder of its own, e.g. --out castguard-merged",
        )
    return ShardNight(merged)


def _shards_line(merged: Merged) -> str:
    done = sum(s.state == "complete" for s in merged.shards)
    head = f"castguard merge: {done} of {len(merged.shards)} shards complete"
    return head + ("" if merged.complete else "; the merged run is INCOMPLETE: it is never used as a baseline")


def _shard_text(shard: ShardRun) -> str:
    prov = shard.provenance
    where = "" if prov is None else f", host {prov.hostname}, GPU {prov.gpu or 'none'}, from {shard.folder}"
    cases = f" ({shard.cases} of {shard.assigned} cases)" if shard.state != "missing" else ""
    return f"shard {shard.index}/{shard.count}: {shard.state}{cases}{where}" + (f": {shard.note}" if shard.note else "")


def _notes_markdown(notes: Sequence[str]) -> str:
    return "\n".join(["## Merge notes", "", *(f"- {note}" for note in notes), ""]) if notes else ""


def _notes_html(notes: Sequence[str]) -> str:
    return (
        (
            '<section id="merge-notes"><h2>Merge notes</h2><ul>'
            + "".join(f"<li>{escape(n)}</li>" for n in notes)
            + "</ul></section>"
        )
        if notes
        else ""
    )
