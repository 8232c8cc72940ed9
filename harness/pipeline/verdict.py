"""The one place a case's status and message are decided: :func:`decide` on a finished :class:`CaseRun`. No pytest.

* ``pass`` / ``fail``: the comparison with the golden, on a runner that really rounds fp16/bf16 (a tuned case: its
  plan's bound);
* ``skip``: the runner cannot judge the case (it computes low precision in fp32: the comparison is still recorded
  as "would pass/fail"; it cannot run the precision; it is unavailable here; the model's golden could not be made);
* ``error``: the case could not run (a conversion or runner error, this case wrote the golden so nothing was
  compared, or it was never reached).

On top of the accuracy verdict, the deployment one: a case meant for TensorRT (``--target tensorrt``, or a
runner whose traits deploy there) whose model does not build there fails. A reused case takes its first case's
verdict. :func:`settled` is the last word, once pytest has judged the test (xfail/xpass).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, cast

from harness.core.errors import HarnessError, RunnerUnavailable
from harness.pipeline.caserun import CaseRun, Stop
from harness.report import CaseRecord

Status = Literal["pass", "fail", "skip", "error"]
TENSORRT = "tensorrt"  # the deployment target whose build decides a case (harness.convert.options.TARGETS)
STOP_STATUS: dict[str, Status] = {
    "cannot_run": "skip",
    "unavailable": "skip",
    "golden_not_made": "skip",
    "error": "error",
    "golden_written": "error",
    "not_reached": "error",
}


@dataclass(frozen=True)
class Verdict:
    """A case's status and the message that explains it."""

    status: Status
    message: str = ""


def decide(run: CaseRun, *, deployment: bool = True) -> Verdict:
    """The case's verdict; see the module docstring. ``deployment=False``: the accuracy verdict alone (what a
    later case that reuses this one's result starts from)."""
    accuracy = _accuracy(run)
    return _deployment(run, accuracy) if deployment else accuracy


def _accuracy(run: CaseRun) -> Verdict:
    if run.stop is not None:
        return _stopped(run, run.stop)
    if run.tuned is not None:  # the bound decides, not the tolerances
        return Verdict("pass" if run.tuned.meets_bound else "fail", run.tuned.message)
    executed, judged = run.executed, run.judged
    assert executed is not None and judged is not None, "a case that did not stop was executed and judged"
    if not executed.rounds_low_precision:
        would = "would pass" if judged.comparison else "would fail"
        return Verdict(
            "skip",
            f"{executed.runner} computes {run.point.precision} in fp32; not a low-precision oracle - use a runner "
            f"that rounds (--runner emulate) (recorded: {would})",
        )
    if judged.comparison:
        return Verdict("pass")
    return Verdict("fail", run.diagnosed.message if run.diagnosed is not None else judged.comparison.summary())


def _stopped(run: CaseRun, stop: Stop) -> Verdict:
    if stop.kind != "reused":
        return Verdict(STOP_STATUS[stop.kind], stop.message)
    assert run.duplicate is not None and run.duplicate.first is not None, "a reused case found its first"
    first = run.duplicate.first
    message = first.message
    if message:
        how = "identical precision plan" if run.duplicate.kind == "plan" else "identical graph"
        message = (
            f"{run.model} [{run.point.id}] converts to the same model as [{first.case_id}] "
            f"({how}; not run again); its result:\n{message}"
        )
    return Verdict(cast(Status, first.status), message)  # SameModels keeps pass/fail/skip records only


def _deployment(run: CaseRun, verdict: Verdict) -> Verdict:
    """A case meant for TensorRT whose model does not build there, or whose types TensorRT changed, fails
    (before its accuracy is looked at: the model cannot be deployed as converted)."""
    build = run.built.build
    if build is None or build.ok or not targets_tensorrt(run) or verdict.status == "error":
        return verdict
    head = f"{run.model} [{run.point.id}] is converted for TensorRT but {build.summary()}"
    fix = (
        "  fix: keep the node's op in FP32 (--exclude-ops / castguard convert --op_types_to_exclude), or report "
        "the op to castguard: --target tensorrt should have kept it FP32"
    )
    return Verdict("fail", "\n".join([head, fix] + ([verdict.message] if verdict.message else [])))


def targets_tensorrt(run: CaseRun) -> bool:
    """Whether a model that does not build with TensorRT fails this case (elsewhere the failed build is
    reported, and the accuracy verdict stands)."""
    return TENSORRT in (run.point.target, run.traits.deploys_to)


def raised(err: HarnessError) -> Verdict:
    """The verdict of a check outside the case pipeline (the FP32 golden test) that raised: an unavailable runner
    skips, anything else is an error with its message."""
    return Verdict("skip" if isinstance(err, RunnerUnavailable) else "error", str(err))


def settled(record: CaseRecord, *, expected_failure: bool) -> CaseRecord:
    """The record's final status once pytest has judged the test: an expected failure is xfail/xpass."""
    if expected_failure and record.status in ("pass", "fail"):
        return replace(record, status="xpass" if record.status == "pass" else "xfail")
    return record
