"""castguard from a user's own code: :class:`Checker` runs one case (or a sweep) of a model, as ``pytest --model``.

The ``castguard`` pytest fixture (:mod:`harness.plugin.fixture`) hands one out; this module has no pytest::

    checker = Checker(config, output_dir=run_folder, on_record=report.add)
    result = checker.check("models/detector.onnx", precision="fp16", data_max=512, inputs=batches,
                           runner="emulate")
    assert result.passed, result.explain()

Everything goes through :class:`harness.pipeline.session.AccuracySession` (one per model and inputs), so the golden
policy (a missing golden is written and the check fails once; stale and corrupt goldens are errors; FP32 must
still reproduce the golden), tolerances, runners, the cache and the TensorRT build check are the suite's. Each
low-precision case's :class:`~harness.report.CaseRecord` goes to ``on_record`` (the report). Bad input (a missing
model, inputs that do not fit it, an unknown runner) raises :class:`~harness.core.errors.UserError`.
"""

from harness.check.checker import Checker, CheckSettings, Inputs, SweepSettings
from harness.check.result import CheckResult

__all__ = ["CheckResult", "CheckSettings", "Checker", "Inputs", "SweepSettings"]
