"""The comparison of a run's report with a baseline report by the nightly rules (:mod:`harness.nightly.rules`).

Cases are matched by ``(model, case_id, inputs_id)``: each rule is applied to every case present in both runs with
the same model (:func:`judge`); a case whose model changed is listed, never judged, except that a stored tuned plan
that stops meeting its bound is a regression on any model version (:func:`tuned_plan_regression`). The result is
one :class:`Comparison`; nothing here renders (see :mod:`harness.nightly.render`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.nightly.rules import GOOD_STATUSES, Key, Rule, Unit, metric
from harness.report.model import CaseRecord, Report


@dataclass(frozen=True)
class Change:
    """One case that moved past a rule: values as recorded (a status or a number), ``delta`` in the rule's unit."""

    model: str
    case_id: str
    inputs_id: str
    rule: Rule
    baseline: float | str
    now: float | str
    delta: float | None = None  # fraction for % and pp, absolute otherwise; None for status
    since: str | None = None  # ``created`` of the first run that showed it (from a history)

    @property
    def key(self) -> Key:
        return (self.model, self.case_id, self.inputs_id)


@dataclass(frozen=True)
class Comparison:
    """The verdict of one run against its baseline. Truthy when nothing regressed."""

    baseline_source: str  # the file the baseline came from
    baseline_created: str
    baseline_commit: str | None
    rules: tuple[Rule, ...]
    compared: int
    regressions: tuple[Change, ...] = ()
    improvements: tuple[Change, ...] = ()
    new: tuple[Key, ...] = ()
    missing: tuple[Key, ...] = ()
    model_changed: tuple[Key, ...] = ()

    def __bool__(self) -> bool:
        return not self.regressions

    @property
    def shared(self) -> int:
        """Cases present in both runs (a changed model included: it is there, only not judged)."""
        return self.compared + len(self.model_changed)

    @property
    def baseline_cases(self) -> int:
        return self.shared + len(self.missing)

    @property
    def current_cases(self) -> int:
        return self.shared + len(self.new)

    @property
    def partial(self) -> bool:
        """This run lacks some of the baseline's cases: it cannot replace the baseline without losing them."""
        return bool(self.missing)

    @property
    def coverage(self) -> str:
        """``baseline 12 cases, this run 12, shared 4``."""
        return f"baseline {self.baseline_cases} cases, this run {self.current_cases}, shared {self.shared}"

    @property
    def nothing_comparable(self) -> bool:
        """No case of this run could be matched with a baseline case (every key renamed or removed)."""
        return self.compared == 0 and not self.model_changed

    @property
    def exit_code(self) -> int:
        """1 when something regressed (pytest's "tests failed"), else 0."""
        return 1 if self.regressions else 0


def compare_reports(current: Report, baseline: Report, *, rules: Sequence[Rule], source: str) -> Comparison:
    """Match cases by key and apply every rule to every case present in both runs with the same model."""
    before = {c.key: c for c in baseline.cases}
    # a case this run never reached (interrupted) has no result to compare: it is no regression, and is left out
    now = {c.key: c for c in current.cases if c.stopped != "not_reached"}
    regressions: list[Change] = []
    improvements: list[Change] = []
    changed_model: list[Key] = []
    compared = 0
    for key in sorted(now.keys() & before.keys()):
        old, new = before[key], now[key]
        if old.model_sha256 != new.model_sha256:
            changed_model.append(key)
            tuned = tuned_plan_regression(old, new)  # a stored tuned plan is checked on every model version
            if tuned is not None:
                regressions.append(tuned)
            continue
        compared += 1
        for rule in rules:
            found = judge(old, new, rule)
            if found is not None:
                (regressions if found[0] else improvements).append(found[1])
    return Comparison(
        baseline_source=source,
        baseline_created=baseline.created,
        baseline_commit=baseline.provenance.git_commit,
        rules=tuple(rules),
        compared=compared,
        regressions=tuple(regressions),
        improvements=tuple(improvements),
        new=tuple(sorted(now.keys() - before.keys())),
        missing=tuple(sorted(before.keys() - now.keys())),
        model_changed=tuple(changed_model),
    )


def tuned_plan_regression(old: CaseRecord, new: CaseRecord) -> Change | None:
    """A tuned case that met its bound and no longer does on a new model version; the rule text names the nodes
    to move to FP32 (from the re-tune the case ran)."""
    if not new.case.tuned or old.status not in GOOD_STATUSES or new.status in GOOD_STATUSES:
        return None
    moves = list(new.moved_fp32)  # from the re-tune the case ran (harness.pipeline.tuned)
    text = "tuned plan misses its bound on the new model version; move to FP32: " + (", ".join(moves) or "(see case)")
    model, case_id, inputs_id = new.key
    return Change(
        model=model,
        case_id=case_id,
        inputs_id=inputs_id,
        rule=Rule(text=text, metric="status"),
        baseline=old.status,
        now=new.status,
    )


TRT_BUILDS = "builds with its types"  # a trt_build Change's baseline/now when the model built


def trt_build_text(record: CaseRecord) -> str:
    """:data:`TRT_BUILDS`, or what TensorRT said about the case's model."""
    build = record.trt_build
    return "not checked" if build is None else (TRT_BUILDS if build.ok else build.summary())


def judge(old: CaseRecord, new: CaseRecord, rule: Rule) -> tuple[bool, Change] | None:
    """``(True, change)`` for a regression, ``(False, change)`` for an improvement, None when within the rule."""
    model, case_id, inputs_id = new.key
    if rule.metric == "trt_build":
        if old.trt_build is None or new.trt_build is None or old.trt_build.ok == new.trt_build.ok:
            return None  # not checked in one run, or no change
        return old.trt_build.ok, Change(
            model, case_id, inputs_id, rule, baseline=trt_build_text(old), now=trt_build_text(new)
        )
    if rule.metric == "status":
        was, now = old.status in GOOD_STATUSES, new.status in GOOD_STATUSES
        if was == now:
            return None
        return was, Change(model, case_id, inputs_id, rule, baseline=old.status, now=new.status)
    known = metric(rule.metric)
    a, b = known.read(old), known.read(new)
    if a is None or b is None:
        return None  # not measured in one run: the status rule speaks for it
    if known.value_floor:
        a, b = (v if math.isnan(v) else max(v, known.value_floor) for v in (a, b))
    delta = _delta(a, b, rule.unit)
    if math.isnan(delta) or delta == 0 or (math.isfinite(a) and math.isfinite(b) and abs(b - a) <= known.floor):
        return None
    worse = delta * known.worse
    if abs(worse) <= rule.threshold * (1 + 1e-9):  # "more than": an exact +25% or -2pp is within the rule
        return None
    return worse > 0, Change(model, case_id, inputs_id, rule, baseline=a, now=b, delta=delta)


def _delta(a: float, b: float, unit: Unit) -> float:
    a, b = (math.inf if math.isnan(a) else a), (math.inf if math.isnan(b) else b)  # NaN errors count as inf
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf if b > a else -math.inf
    if unit == "%":
        return (b - a) / abs(a) if a != 0 else math.copysign(math.inf, b - a)
    return b - a
