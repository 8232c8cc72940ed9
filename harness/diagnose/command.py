"""The commands a diagnosis prints: they run as printed, from any folder.

Absolute, shell-quoted paths; every setting of the case (``castguard convert`` flags, through tune's
:func:`harness.tune.plan.convert_args`, the one home of that flag list); and, when the case's conversion used
magnitudes (a finite ``data_max``), the golden's own feeds as ``--calibration_data``, so that the command's
reference run sees the data the case's conversion saw.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.convert import ConvertOptions, ReferenceData
from harness.core.files import atomic_write
from harness.core.npzfile import save_npz
from harness.data.recipes import Feed
from harness.tune.oracle import plan_options
from harness.tune.plan import convert_args


def needs_feeds(options: ConvertOptions) -> bool:
    """The conversion reads magnitudes (a finite data_max); with ``inf`` castguard convert skips that run."""
    return not math.isinf(options.data_max)


def write_feeds(folder: Path, feeds: Sequence[Feed]) -> Path:
    """The golden's feeds as a folder of ``.npz`` (one per iteration), the form ``--calibration_data`` reads."""
    import io

    folder.mkdir(parents=True, exist_ok=True)
    for i, feed in enumerate(feeds):
        buffer = io.BytesIO()
        save_npz(buffer, {name: np.asarray(value) for name, value in feed.items()})
        atomic_write(folder / f"{i:04d}.npz", buffer.getvalue())
    return folder


def convert_command(
    model_path: Path, options: ConvertOptions, kept: Sequence[str], *, output_path: Path, calibration: Path | None
) -> str:
    """``castguard convert`` writing the case's conversion with ``kept`` FP32 to ``output_path``."""
    reference = ReferenceData(calibration_data=str(calibration.resolve()) if calibration is not None else None)
    args = convert_args(
        plan_options(options, kept),
        reference,
        onnx_path=str(model_path.resolve()),
        output_path=str(output_path.resolve()),
    )
    return shlex.join(["castguard", "convert", *args])


def tune_command(model_path: Path, options: ConvertOptions, *, output_path: Path, calibration: Path | None) -> str:
    """``castguard tune`` from the case's settings, judged by the tolerance policy as the case is. Its
    ``--calibration_data`` (the golden's feeds) is what tune measures on."""
    reference = ReferenceData(calibration_data=str(calibration.resolve()) if calibration is not None else None)
    args = convert_args(options, reference, onnx_path=str(model_path.resolve()), output_path=str(output_path.resolve()))
    return shlex.join(["castguard", "tune", *args, "--tolerance_policy"])
