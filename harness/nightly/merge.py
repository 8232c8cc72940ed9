"""``castguard merge SHARD_DIR... --out DIR``: the shards of one night as one run, judged once. No pytest here.

The shards' cases and saved outputs (:mod:`harness.report.merge`) become one run in ``DIR``, written as a
``pytest`` run writes its report folder (:class:`harness.report.collect.ReportSession`): ``runs/<id>/`` with the
outputs and the run's own report, and, when every shard completed, the published ``report.json``/``.md``/``.html``
(so ``castguard recheck DIR`` and ``--baseline DIR`` work on it). ``--baseline``, ``--history`` and
``--fail-on-regression`` are the pytest options (:class:`harness.nightly.run.NightlyRun`): the comparison and the
history entry happen here, once, for the whole night. An incomplete night (a shard missing, interrupted, killed
or failed) is said in the terminal, report.md and report.json, stored in the history marked, and never a baseline.

Exit status: 0 when the night is complete and every case passed (or failed as expected) with no regression under
``--fail-on-regression``; 1 otherwise (as pytest's 1); 2 for a usage error (shards that do not belong together).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from html import escape
from pathlib import Path

from harness.core.errors import UserError
from harness.nightly.run import NightlyRun
from harness.report import Report, utc_now
from harness.report.collect import ReportSession
from harness.report.merge import Merged, copy_outputs, merge_shards
from harness.report.model import ShardRun


def merge_command(
    folders: Sequence[Path], *, out: Path, nightly: NightlyRun | None, shown_from: Path | None = None
) -> tuple[list[str], int]:
    """Merge, judge, write; returns the terminal lines and the exit status (see the module docstring)."""
    merged = merge_shards(folders)
    if out.resolve() in {f.resolve() for f in folders}:
        raise UserError(
            where=f"--out {out}",
            problem="is one of the shard folders",
            fix="write the merged report to a folder of its own, e.g. --out castguard-merged",
        )
    session = ReportSession(report_dir=out)
    session.start()
    try:
        try:
            copy_outputs(merged, session.run_dir)
        except UserError:  # a full or read-only --out: no half-made run folder is left
            session.close()
            shutil.rmtree(session.run_dir, ignore_errors=True)
            raise
        report = Report.build(
            merged.records,
            created=utc_now(),
            provenance=merged.provenance,
            run_id=session.run_id,
            interrupted=not merged.complete,
            planned_cases=merged.planned_cases,
            shards=merged.shards,
        )
        if nightly is not None:
            nightly.decide(report)  # the verdict first, then its rendering
        extra_md, extra_html = nightly.sections() if nightly is not None else ([], [])
        notes = (*merged.notes, *(f"failed outside the sweep cases: {test}" for test in merged.failed_tests))
        finished = session.write(
            report, extra_md=[_notes_markdown(notes), *extra_md], extra_html=[_notes_html(notes), *extra_html]
        )
    finally:
        session.close()
    lines = [
        _shards_line(merged),
        *(f"  {_shard_text(s)}" for s in merged.shards),
        *(f"  note: {note}" for note in notes),
        finished.summary_line(relative_to=shown_from),
    ]
    if nightly is not None:
        lines += ["castguard nightly regression:", *(f"  {line}" for line in nightly.terminal_lines())]
    failing = any(c.status in ("fail", "error", "xpass") for c in report.cases)
    code = int(
        not merged.complete
        or failing
        or bool(merged.failed_tests)
        or (nightly is not None and nightly.exit_code != 0)
        or finished.error is not None
    )
    if nightly is not None and nightly.exit_code == 2:  # the baseline could not be read: a usage error
        code = 2
    return lines, code


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
