"""``castguard merge``'s data side: read shard report folders, check they belong together, merge their cases.

A shard folder is the ``--report-dir`` of one ``pytest --shard K/N`` run (a CI artifact). Its newest run folder
with a start marker (``runs/<id>/shard.json``) is the shard's run. How it ended:

* ``complete``: its ``report.json`` is there, not interrupted, pytest ended normally (exit 0 or 1: cases may
  fail, that is the verdict's business), and every case it was assigned has a record;
* ``interrupted``: its report says so (Ctrl-C, a cancelled job, ``-x``);
* ``killed``: no ``report.json`` (the process died): its finished cases are recovered from its case files;
* ``failed``: pytest ended abnormally (internal or usage error), or cases it was assigned have no record;
* ``missing``: no folder of the merge holds that shard.

Anything but ``complete`` makes the merged run incomplete: its cases are kept, the missing ones are absent (never
claimed), and the run is never a baseline. Shards that disagree on the castguard version, the models, the
sweep settings or a golden are refused (:class:`UserError` naming both folders and the difference); other
version differences (onnx, onnxruntime, Python, numpy, TensorRT, the git commit) are kept as notes. No pytest.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import UserError
from harness.core.files import disk_full, not_writable
from harness.report.collect import collect_records
from harness.report.io import SHARD_FILE, read_report, read_shard_marker
from harness.report.model import CaseRecord, Provenance, Report, ShardInfo, ShardRun
from harness.report.runs import is_active, run_folders

FLAGGED = ("onnx", "onnxruntime", "numpy", "python", "tensorrt", "git_commit")  # differences noted, not refused
_SHOWN = 160


@dataclass(frozen=True)
class ShardFolder:
    """One shard's run as found on disk."""

    folder: Path  # as given to castguard merge
    run_dir: Path
    info: ShardInfo  # from its report when it finished, else from its start marker
    provenance: Provenance
    report: Report | None  # None: no report.json (killed)
    records: tuple[CaseRecord, ...]
    torn: int = 0  # damaged last lines dropped from its case files

    @property
    def name(self) -> str:
        return f"shard {self.info.text} ({self.folder})"

    def state(self) -> tuple[str, str]:
        """(state, why) as the module docstring defines them."""
        have, want = len(self.records), self.info.part.case_count
        if self.report is None:
            torn = f"; {self.torn} damaged last line(s) dropped" if self.torn else ""
            return "killed", f"no report.json: it stopped mid-run; {have} of its {want} cases recovered{torn}"
        if self.report.interrupted:
            return "interrupted", f"its run was interrupted after {have} of its {want} cases"
        if self.info.exit_status not in (0, 1):
            return "failed", f"pytest exit status {self.info.exit_status}; {have} of its {want} cases have a result"
        if have < want:
            done = {(r.model, r.case_id) for r in self.records}
            missing = sorted(f"{m} / {c}" for m, ids in self.info.part.work for c in ids if (m, c) not in done)
            return "failed", f"{have} of its {want} cases have a result; none for " + _short(", ".join(missing))
        return "complete", ""


def read_shard(folder: Path) -> ShardFolder:
    """The newest shard run in a report folder; UserError when it has none or it is still running."""
    if not folder.is_dir():
        raise UserError(
            where=folder,
            problem="shard folder not found",
            fix="give the --report-dir of each pytest --shard K/N run (a CI artifact)",
        )
    runs = [run for run in run_folders(folder) if (run / SHARD_FILE).is_file()]
    if not runs:
        raise UserError(
            where=folder,
            problem="holds no shard run (no runs/<id>/shard.json)",
            fix="give the --report-dir of a pytest --shard K/N run",
        )
    run = runs[-1]
    if is_active(run):
        raise UserError(
            where=run, problem="this shard is still running", fix="wait for it to end (or stop it), then merge"
        )
    info, provenance = read_shard_marker(run / SHARD_FILE)
    if (run / "report.json").is_file():
        report = read_report(run / "report.json")
        if report.shard is None:
            raise UserError(
                where=run / "report.json",
                problem="is not a shard's report (no shard record)",
                fix="re-run that shard with pytest --shard K/N",
            )
        return ShardFolder(
            folder=folder,
            run_dir=run,
            info=report.shard,
            provenance=report.provenance,
            report=report,
            records=report.cases,
        )
    records, torn = collect_records(run, torn_tail_ok=True)
    return ShardFolder(
        folder=folder, run_dir=run, info=info, provenance=provenance, report=None, records=tuple(records), torn=torn
    )


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def check_agreement(shards: Sequence[ShardFolder]) -> tuple[str, ...]:
    """Refuse shards that do not belong to one night; return notes on the differences that are only flagged."""
    first = shards[0]
    seen: dict[int, ShardFolder] = {}
    for shard in shards:
        if shard.info.index in seen:
            same = seen[shard.info.index].run_dir == shard.run_dir
            raise UserError(
                where=f"{seen[shard.info.index].folder} and {shard.folder}",
                problem=f"both hold shard {shard.info.text}" + (" (the same run)" if same else ""),
                fix="give each shard's folder once; a folder's newest shard run is the one merged, so "
                "shards that share one --report-dir hide each other: give each its own",
            )
        seen[shard.info.index] = shard
        for what, mine, theirs in _differences(first, shard):
            raise UserError(
                where=f"{first.folder} and {shard.folder}",
                problem=f"the shards disagree on {what}: {first.name} has {_short(mine)}, "
                f"{shard.name} has {_short(theirs)}",
                fix="merge only the shards of one night: the same castguard, models, sweep and goldens "
                "(re-run the odd shard)",
            )
    notes = []
    for field in FLAGGED:
        values = {getattr(s.provenance, field) for s in shards}
        if len(values) > 1:
            notes.append(
                f"the shards ran with different {field}: "
                + "; ".join(f"shard {s.info.text}: {getattr(s.provenance, field)}" for s in shards)
            )
    return tuple(notes)


def _differences(a: ShardFolder, b: ShardFolder) -> list[tuple[str, str, str]]:
    found = []
    if a.info.count != b.info.count:
        found.append(("the number of shards", f"N={a.info.count}", f"N={b.info.count}"))
    if a.provenance.castguard != b.provenance.castguard:
        found.append(("the castguard version", a.provenance.castguard, b.provenance.castguard))
    if sorted(a.info.part.models) != sorted(b.info.part.models):
        only_a, only_b = (
            sorted(set(a.info.part.models) - set(b.info.part.models)),
            sorted(set(b.info.part.models) - set(a.info.part.models)),
        )
        found.append(
            (
                "the models",
                f"{len(a.info.part.models)} (only here: {', '.join(only_a) or '–'})",
                f"{len(b.info.part.models)} (only here: {', '.join(only_b) or '–'})",
            )
        )
    settings_a, settings_b = dict(a.info.settings), dict(b.info.settings)
    for key in sorted(set(settings_a) | set(settings_b)):
        if settings_a.get(key) != settings_b.get(key):
            found.append((f"the setting {key!r}", str(settings_a.get(key)), str(settings_b.get(key))))
    goldens_b = dict(b.info.goldens)
    for path, digest in a.info.goldens:
        if path in goldens_b and goldens_b[path] != digest:
            found.append((f"the golden {path}", f"sha256 {digest[:12]}", f"sha256 {goldens_b[path][:12]}"))
    return found


@dataclass(frozen=True)
class Merged:
    """The shards' cases as one run, and how each shard fared."""

    records: tuple[CaseRecord, ...]
    shards: tuple[ShardRun, ...]
    planned_cases: int
    provenance: Provenance
    notes: tuple[str, ...]
    failed_tests: tuple[str, ...]  # failed tests that are not sweep cases (e.g. a golden check), per shard
    sources: tuple[ShardFolder, ...]

    @property
    def complete(self) -> bool:
        return all(s.state == "complete" for s in self.shards)


def merge_shards(folders: Sequence[Path]) -> Merged:
    """Read, check and merge the shard folders (see the module docstring)."""
    if not folders:
        raise UserError(where="castguard merge", problem="no shard folder given", fix="give SHARD_DIR... --out DIR")
    shards = sorted((read_shard(f) for f in folders), key=lambda s: s.info.index)
    notes = check_agreement(shards)
    by_index = {s.info.index: s for s in shards}
    count = shards[0].info.count
    records: dict[tuple[str, str, str], CaseRecord] = {}
    runs = []
    for index in range(1, count + 1):
        shard = by_index.get(index)
        if shard is None:
            runs.append(ShardRun(index=index, count=count, state="missing", note=_missing_note(folders, index, count)))
            continue
        for record in shard.records:
            if not shard.info.part.runs(record.model, record.case_id):
                raise UserError(
                    where=shard.run_dir,
                    problem=f"has a case it was not assigned: {record.model} / {record.case_id}",
                    fix="re-run that shard with this castguard",
                )
            records[record.key] = record
        state, why = shard.state()
        runs.append(
            ShardRun(
                index=index,
                count=count,
                state=state,
                folder=str(shard.folder),
                run_id=shard.run_dir.name,
                cases=len(shard.records),
                assigned=shard.info.part.case_count,
                provenance=shard.provenance,
                note=why,
            )
        )
    failed = tuple(f"shard {s.info.text}: {test}" for s in shards for test in s.info.failed_tests)
    return Merged(
        records=tuple(records.values()),
        shards=tuple(runs),
        planned_cases=shards[0].info.part.total_cases,
        provenance=merged_provenance([s.provenance for s in shards]),
        notes=notes,
        failed_tests=failed,
        sources=tuple(shards),
    )


def _missing_note(folders: Sequence[Path], index: int, count: int) -> str:
    """Why a shard is missing; names a folder that holds an older run of it (shards sharing one --report-dir)."""
    for folder in folders:
        for run in reversed([r for r in run_folders(folder) if (r / SHARD_FILE).is_file()][:-1]):
            try:
                info, _ = read_shard_marker(run / SHARD_FILE)
            except UserError:
                continue
            if (info.index, info.count) == (index, count):
                return (
                    f"no folder given holds it as its newest shard run, but {folder} holds an older run of it "
                    f"({run.name}): shards that share one --report-dir hide each other; give each its own"
                )
    return "no folder given holds this shard (its job did not run, or uploaded nothing)"


def merged_provenance(provenances: Sequence[Provenance]) -> Provenance:
    """One provenance for the merged report: each field's distinct values in shard order, joined by ``; ``."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(Provenance):
        found = [getattr(p, field.name) for p in provenances]
        if field.name in ("runners", "runner_sources", "converter_sources"):
            values[field.name] = tuple(dict.fromkeys(r for runners in found for r in runners))
        else:
            distinct = [v for v in dict.fromkeys(found) if v is not None]
            values[field.name] = "; ".join(distinct) if distinct else None
    return Provenance(**values)


def copy_outputs(merged: Merged, run_folder: Path) -> None:
    """Copy every shard's saved outputs into the merged run's folder (paths in the records stay valid): into a
    temporary folder first, renamed to ``outputs/`` once every file is whole. A full or read-only disk is one
    UserError naming the folder (:class:`~harness.core.errors.DiskFull`), and leaves no partial file behind."""
    final = run_folder / "outputs"
    temp = run_folder / ".outputs.tmp"
    at = final
    try:
        for shard in merged.sources:
            source = shard.run_dir / "outputs"
            for path in sorted(source.rglob("*")) if source.is_dir() else []:
                target = temp / path.relative_to(source)
                at = final / path.relative_to(source)
                if path.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                elif path.is_file():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
        if temp.is_dir():
            os.replace(temp, final)
    except OSError as err:
        shutil.rmtree(temp, ignore_errors=True)
        raise (disk_full(at, err) or not_writable(at.parent, err) or _copy_failed(final, err)) from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _copy_failed(folder: Path, err: OSError) -> UserError:
    return UserError(
        where=folder,
        problem=f"the shards' saved outputs could not be copied ({err.strerror or err}); nothing was left half-copied",
        fix="check the shard folders and the --out folder, then run castguard merge again",
    )
