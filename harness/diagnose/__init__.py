"""Why a failing case fails, and a fix that has been run (issue 23, item 1). No pytest here.

One entry point, :func:`diagnose_failure`: the divergence profile (:mod:`.profile`, one marked-all run of
each model), the cause (:mod:`.cause`, the first divergence whose error reaches a failing output), the fix
verified on the case's runner (:mod:`.verify`, at most ``budget`` conversions, tune's search), and the
commands (:mod:`.command`). The facts (:mod:`.facts`) go on the :class:`~harness.report.CaseRecord`;
:mod:`harness.report` renders them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_API = {
    "Diagnosis": "facts",
    "Divergence": "facts",
    "TensorError": "facts",
    "FailedCase": "failure",
    "ModelPair": "profile",
    "diagnose_failure": "failure",
    "first_divergence": "failure",
    "DEFAULT_BUDGET": "facts",
}

__all__ = [
    "DEFAULT_BUDGET",
    "Diagnosis",
    "Divergence",
    "FailedCase",
    "ModelPair",
    "TensorError",
    "diagnose_failure",
    "first_divergence",
    "with_outputs",
]


def __getattr__(name: str) -> Any:
    """Import on first use: :mod:`harness.report` reads the facts without loading the runners and tune."""
    if name == "with_outputs":
        from harness.data.marked import with_outputs

        return with_outputs
    if name not in _API:
        raise AttributeError(f"module 'harness.diagnose' has no attribute {name!r}")
    return getattr(importlib.import_module(f"harness.diagnose.{_API[name]}"), name)


if TYPE_CHECKING:
    from harness.data.marked import with_outputs as with_outputs
    from harness.diagnose.facts import DEFAULT_BUDGET as DEFAULT_BUDGET
    from harness.diagnose.facts import Diagnosis as Diagnosis
    from harness.diagnose.facts import Divergence as Divergence
    from harness.diagnose.facts import TensorError as TensorError
    from harness.diagnose.failure import FailedCase as FailedCase
    from harness.diagnose.failure import diagnose_failure as diagnose_failure
    from harness.diagnose.failure import first_divergence as first_divergence
    from harness.diagnose.profile import ModelPair as ModelPair
