"""Golden provenance drift: goldens made with another onnx or onnxruntime than the current run.

A golden's sidecar records the library versions it was produced with (``versions`` in
:mod:`harness.data.goldens`). When they differ from this run's, the FP32 reference itself may have moved, so
every case compared with that golden carries a note saying so (``CaseRecord.notes``); with
``--strict-provenance`` the drift is an error instead (:class:`GoldenProvenanceError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.errors import GoldenError

CHECKED = ("onnx", "onnxruntime")  # the packages that decide the FP32 golden's numbers


class GoldenProvenanceError(GoldenError):
    """``--strict-provenance``: a golden was made with other onnx/onnxruntime versions than this run."""


def installed_versions() -> dict[str, str]:
    """This process's onnx and onnxruntime versions, read as the golden sidecar records them (``__version__``)."""
    import onnx
    import onnxruntime

    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def drift_notes(meta: Mapping[str, Any], *, current: Mapping[str, str]) -> tuple[str, ...]:
    """One note per checked package whose golden version differs from ``current`` (missing counts as differing)."""
    recorded = meta.get("versions")
    recorded = recorded if isinstance(recorded, Mapping) else {}
    return tuple(
        f"golden made with {name} {recorded.get(name, 'unrecorded')}, this run uses {current[name]}"
        for name in CHECKED
        if name in current and str(recorded.get(name)) != current[name]
    )


def check_golden_provenance(
    meta: Mapping[str, Any], *, current: Mapping[str, str], strict: bool, golden: Path | str
) -> tuple[str, ...]:
    """The drift notes of one golden; raises GoldenProvenanceError instead when ``strict`` and it drifted."""
    notes = drift_notes(meta, current=current)
    if notes and strict:
        model = meta.get("model", "MODEL")
        raise GoldenProvenanceError(
            where=golden,
            problem="; ".join(notes) + " (--strict-provenance)",
            fix=f"regenerate the golden with this run's versions (pytest --model {model} "
            "--update-goldens) and review it, or drop --strict-provenance",
        )
    return notes
