"""The tune step's result: what :mod:`harness.tune.case` hands the pipeline in place of a plain conversion.

The tuned case (``pytest --tune``) is a variant of the same pipeline: its first step tunes on the golden's inputs
(or checks the stored plan) and decides the verdict by the tune's bound; then execute -> judge -> record run as for
any case (:func:`harness.pipeline.case.run_tuned`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.convert import ConversionResult


@dataclass(frozen=True)
class Tuned:
    """The tuned plan's conversion, the nodes it keeps FP32 (node, why), the bound's verdict and its notes."""

    conversion: ConversionResult
    kept_fp32: tuple[tuple[str, str], ...]
    status: Literal["pass", "fail"]
    message: str = ""
    notes: tuple[str, ...] = ()
    seconds: float = 0.0  # the tune (or the stored plan's check), with the golden and the model's context
