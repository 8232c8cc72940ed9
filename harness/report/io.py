"""The report folder on disk: ``report.json`` / ``report.md`` / ``report.html`` and saved outputs.

Layout (paths in records are relative to the report folder)::

    report.json  report.md  report.html
    outputs/<model>/<inputs_id>/golden.npz        the FP32 golden the cases were compared with
    outputs/<model>/<inputs_id>/<case_id>.npz     each case's obtained outputs, for recheck

Every file is written atomically (temporary file in the same folder, then ``os.replace``). Output
archives hold keys ``"<iteration>/<output name>"``; fp16/bf16 arrays are stored widened to float32,
which is exact. They are read back with ``allow_pickle=False`` and only from inside the report folder.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.dtypes import BFLOAT16
from harness.core.errors import UserError
from harness.core.files import (
    COMPRESS_MAX_BYTES,
    atomic_link,
    atomic_write,
    atomic_write_all,
    safe_component,
)
from harness.core.jsonfile import read_json
from harness.core.npzfile import read_npz, save_npz
from harness.report.model import Provenance, Report, ShardInfo
from harness.report.plotcache import PlotCache
from harness.report.render_html import render_html
from harness.report.render_md import render_markdown
from harness.report.serde import (
    READABLE_VERSIONS,
    ReportFormatError,
    report_from_dict,
    report_to_dict,
    shard_marker_from_dict,
    shard_marker_to_dict,
)
from harness.report.view import ReportView, report_view

SHARD_FILE = "shard.json"  # a shard's start marker in its run folder


@dataclass(frozen=True)
class ReportPaths:
    json: Path
    markdown: Path
    html: Path


def report_paths(out_dir: Path) -> ReportPaths:
    """Where :func:`write_report` puts the three files of a report in ``out_dir``."""
    return ReportPaths(json=out_dir / "report.json", markdown=out_dir / "report.md", html=out_dir / "report.html")


@dataclass(frozen=True)
class RenderedReport:
    """A report's markdown and HTML pages (the HTML with its plots: the costly part, drawn once per report)."""

    markdown: str
    html: str


def render_report(
    view: ReportView,
    *,
    extra_md: Sequence[str] = (),
    extra_html: Sequence[str] = (),
    plots: PlotCache | None = None,
) -> RenderedReport:
    """Both pages of a report, from its one view (:func:`harness.report.view.report_view`); ``extra_*``: sections
    after the header; ``plots``: the plots' cache (None: drawn now)."""
    return RenderedReport(
        markdown=render_markdown(view, extra=extra_md), html=render_html(view, extra=extra_html, plots=plots)
    )


def write_report(
    report: Report,
    out_dir: Path,
    *,
    extra_md: Sequence[str] = (),
    extra_html: Sequence[str] = (),
    rendered: RenderedReport | None = None,
) -> ReportPaths:
    """Write the three report files into ``out_dir`` (created if needed); ``extra_*``: sections after the header.
    ``rendered``: the pages already rendered from this report (or from one that differs only in its saved-output
    paths, which the pages do not show), so that a report written twice is drawn once."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = report_paths(out_dir)
    text = json.dumps(report_to_dict(report), indent=1, allow_nan=False) + "\n"
    pages = rendered or render_report(report_view(report), extra_md=extra_md, extra_html=extra_html)
    atomic_write_all(
        {paths.json: text.encode(), paths.markdown: pages.markdown.encode(), paths.html: pages.html.encode()}
    )  # all three or none
    return paths


def read_report(path: Path) -> Report:
    """Load a ``report.json``; a corrupt file or an unknown schema version is a UserError naming it."""
    if not Path(path).exists():
        raise UserError(where=path, problem="report not found", fix="check the path (a report.json file)")
    data = read_json(path, what="report (corrupt or truncated)", fix="re-run the sweep to write a fresh report")
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise UserError(
            where=path,
            problem=f"report schema_version {version!r} is not supported (this castguard "
            f"reads versions {', '.join(map(str, READABLE_VERSIONS))})",
            fix="read it with the castguard that wrote it, or re-run",
        )
    try:
        return report_from_dict(data)
    except ReportFormatError as err:
        raise UserError(
            where=path, problem=f"not a valid report: {err}", fix="re-run the sweep to write a fresh report"
        ) from err


def write_shard_marker(run_folder: Path, shard: ShardInfo, *, provenance: Provenance) -> Path:
    """Write ``run_folder/shard.json`` (atomically)."""
    path = run_folder / SHARD_FILE
    atomic_write(path, (json.dumps(shard_marker_to_dict(shard, provenance=provenance), indent=1) + "\n").encode())
    return path


def read_shard_marker(path: Path) -> tuple[ShardInfo, Provenance]:
    """A shard's ``shard.json``; a damaged one is a UserError naming it."""
    fix = "re-run that shard (pytest --shard K/N) to write a fresh one"
    data = read_json(path, what="shard marker", fix=fix)
    try:
        return shard_marker_from_dict(data)
    except ReportFormatError as err:
        raise UserError(where=path, problem=f"not a readable shard marker ({err})", fix=fix) from err


def outputs_relpath(model: str, inputs_id: str, case_id: str) -> str:
    return f"outputs/{safe_component(model)}/{safe_component(inputs_id or 'inputs')}/{safe_component(case_id)}.npz"


def golden_relpath(model: str, inputs_id: str) -> str:
    return f"outputs/{safe_component(model)}/{safe_component(inputs_id or 'inputs')}/golden.npz"


_WIDENED = (np.dtype(np.float16), BFLOAT16)
"""Saved as float32 (exactly)."""
GOLDEN_OUTPUTS = "output/"
"""The prefix of the outputs' arrays in a golden's own file (:mod:`harness.data.goldens`)."""


def save_outputs(report_dir: Path, relpath: str, iterations: Sequence[Mapping[str, np.ndarray]]) -> Path:
    """Write one run's outputs (a dict per iteration) to ``report_dir/relpath``, atomically."""
    path = _inside(report_dir, relpath)
    arrays = {}
    for index, outputs in enumerate(iterations):
        for name, value in outputs.items():
            array = np.asarray(value)
            arrays[f"{index}/{name}"] = array.astype(np.float32) if array.dtype in _WIDENED else array
    path.parent.mkdir(parents=True, exist_ok=True)
    small = sum(int(a.nbytes) for a in arrays.values()) <= COMPRESS_MAX_BYTES
    atomic_write(path, lambda handle: save_npz(handle, arrays, compressed=small))
    return path


def save_golden_copy(
    report_dir: Path, relpath: str, *, golden_file: Path, iterations: Sequence[Mapping[str, np.ndarray]]
) -> Path:
    """The golden's outputs in the report folder: a hard link to the golden's own file (``output/<i>/<name>``
        beside its inputs; the goldens folder replaces that file when it rewrites it, so the link keeps this run's
        golden), or, where the two folders cannot share a file or an output is fp16 or bf16 (which the golden's file stores as
    they are, :func:`save_outputs` as float32), its outputs written. A decoder's
        logits are not written a second time in every run."""
    path = _inside(report_dir, relpath)
    as_saved = all(np.asarray(v).dtype not in _WIDENED for outputs in iterations for v in outputs.values())
    if as_saved and golden_file.is_file() and atomic_link(golden_file, path):
        return path
    return save_outputs(report_dir, relpath, iterations)


def load_outputs(report_dir: Path, relpath: str) -> list[dict[str, np.ndarray]]:
    """Read outputs saved by :func:`save_outputs` or linked by :func:`save_golden_copy` (its ``output/`` arrays);
    the path must stay inside ``report_dir``."""
    path = _inside(report_dir, relpath)
    try:
        stored = read_npz(path)[0]
    except FileNotFoundError:
        raise UserError(where=path, problem="saved outputs not found", fix="re-run the sweep") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise UserError(where=path, problem=f"saved outputs are unreadable: {err}", fix="re-run the sweep") from err
    golden = any(key.startswith(GOLDEN_OUTPUTS) for key in stored)
    items = {
        key.removeprefix(GOLDEN_OUTPUTS): v for key, v in stored.items() if not golden or key.startswith(GOLDEN_OUTPUTS)
    }
    iterations: dict[int, dict[str, np.ndarray]] = {}
    for key, array in items.items():
        index, slash, name = key.partition("/")
        if not slash or not index.isdigit():
            raise UserError(where=path, problem=f"unexpected key {key!r}", fix="re-run the sweep")
        iterations.setdefault(int(index), {})[name] = array
    if sorted(iterations) != list(range(len(iterations))):
        raise UserError(where=path, problem="iterations are missing", fix="re-run the sweep")
    return [iterations[i] for i in range(len(iterations))]


def _inside(report_dir: Path, relpath: str) -> Path:
    root = report_dir.resolve()
    path = (root / relpath).resolve()
    if Path(relpath).is_absolute() or not path.is_relative_to(root):
        raise UserError(
            where=relpath,
            problem=f"the path leaves the report folder {report_dir}",
            fix="use paths relative to and inside the report folder",
        )
    return path
