"""The threshold-sweep report: data model, JSON/markdown/HTML files, plots. Nothing here decides pass/fail."""

from __future__ import annotations

from harness.report.figures import OutputStats, Timings, output_stats
from harness.report.io import (
    ReportPaths,
    golden_relpath,
    load_outputs,
    outputs_relpath,
    read_report,
    save_golden_copy,
    save_outputs,
    write_report,
)
from harness.report.model import (
    SCHEMA_VERSION,
    STATUSES,
    CaseRecord,
    Divergence,
    Provenance,
    Report,
)
from harness.report.provenance import collect_provenance, utc_now

__all__ = [
    "SCHEMA_VERSION",
    "STATUSES",
    "CaseRecord",
    "Divergence",
    "OutputStats",
    "Provenance",
    "Report",
    "ReportPaths",
    "Timings",
    "collect_provenance",
    "golden_relpath",
    "load_outputs",
    "outputs_relpath",
    "read_report",
    "output_stats",
    "save_golden_copy",
    "save_outputs",
    "utc_now",
    "write_report",
]
