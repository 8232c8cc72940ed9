"""The nightly verdict: compare a run's :class:`~harness.report.Report` with a baseline report.

Rules are written like pytest-benchmark's ``--benchmark-compare-fail``, one per metric, comma-separated::

    max_rel:+25%        the case's worst max_rel grew by more than 25 %
    lowp_share:-2pp     the low-precision FLOP share fell by more than 2 percentage points
    top_token:-1pp      logits' top-1 token agreement fell by more than 1 percentage point
    kl:+50%             logits' mean KL(softmax(golden) || softmax(obtained)) grew by more than 50 %
    speedup:-10%        the measured speedup over FP32 fell by more than 10 % (GPU runners; changes under
                        SPEEDUP_FLOOR are noise)
    convert_time:+50%   conversion took more than 50 % longer (and at least TIME_FLOOR_S longer; cached
                        conversions and the model's shared magnitudes are never timed against fresh ones)
    max_abs:+0.01       an absolute change (no unit)
    status              a case that passed (or failed as expected) no longer does
    trt_build           a case whose converted model built in TensorRT with its types (the build check,
                        :mod:`harness.pipeline.build_check`) no longer does; judged when both runs checked it

The sign says which way is worse and may be left out; a sign that points the wrong way is an error
(``max_rel:-25%`` would flag improvements). Rules are parsed once, when options are read
(:func:`parse_rules`); a bad rule raises :class:`~harness.core.errors.UserError` naming it.

Cases are matched by ``(model, case_id, inputs_id)``. New and missing cases are listed; a case whose model
file changed (another sha256) is listed as "model changed", never judged (until --update-goldens its golden is
stale and the run already fails on that; after it, the next clean run on the new model becomes the baseline). A change past a rule's threshold in the good direction is an improvement. Nothing
here renders (see :mod:`harness.nightly.render`). This module holds the rules (the metrics, their floors, the parser);
:mod:`harness.nightly.comparison` applies them to two reports.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.core.errors import UserError
from harness.report.model import CaseRecord

Unit = Literal["%", "pp", "abs", "status"]
Key = tuple[str, str, str]  # (model, case_id, inputs_id), as CaseRecord.key
GOOD_STATUSES = ("pass", "xfail")  # what a healthy case reports; anything else after it is a regression
TIME_FLOOR_S = 0.25  # timing changes smaller than this are noise: scheduling, and which case of an xdist
# worker pays its first-run warm-up (measured 0.13 s on mnist under -n 2)
SPEEDUP_FLOOR = 0.05  # speedup changes smaller than this are GPU timing noise (interleaved medians of a shared
# H100 moved by up to 0.04 between two runs, 2026-11-22: docs/gpu-fidelity.md)
OPTION = "--fail-on-regression"
MAX_REL_FLOOR = 0.1  # max_rel below 10 % counts as 10 %: on well-scaled elements fp16 rounding gives ~1e-3, and
# a near-zero golden element alone can move it by orders of magnitude in either direction
ERROR_FLOOR = 1e-5  # scaled-error changes below this are fp32 kernel-order noise (fp16's eps is 9.8e-4)
RECOMMENDED_RULES = (
    "status,trt_build,error:+25%,lowp_share:-2pp"  # robust: no max_rel (see MAX_REL_FLOOR); in the README
)
_RULE = re.compile(r"(?P<sign>[+-]?)(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)(?P<unit>%|pp)?\Z")


@dataclass(frozen=True)
class Metric:
    """A number read from every case, and which way it gets worse (+1: growing, -1: shrinking)."""

    name: str
    description: str
    worse: Literal[1, -1]
    read: Callable[[CaseRecord], float | None]
    share: bool = False  # a 0..1 share: "pp" allowed
    floor: float = 0.0  # smaller absolute changes are noise, never judged
    value_floor: float = 0.0  # values below it count as it (a relative change of tiny values is noise)


def _worst_output(field: str) -> Callable[[CaseRecord], float | None]:
    def read(record: CaseRecord) -> float | None:
        values = [getattr(o, field) for o in record.outputs]
        return max((math.inf if math.isnan(v) else v for v in values), default=None)

    return read


def _logits(field: str, worst: Callable[[Iterable[float]], float]) -> Callable[[CaseRecord], float | None]:
    """The worst logits figure (:mod:`harness.judge.vocab`) over the case's outputs; None without logits."""

    def read(record: CaseRecord) -> float | None:
        values = [v for v in (getattr(o, field) for o in record.outputs) if v is not None]
        return worst(values) if values else None

    return read


def _over_tolerance(record: CaseRecord) -> float | None:
    """Worst max_abs / (atol + rtol x max|golden|) over the outputs: the error in units of the output's tolerance."""
    values = []
    for o in record.outputs:
        allowed = o.atol + o.rtol * o.golden_absmax
        values.append(
            math.inf
            if math.isnan(o.max_abs)
            else (o.max_abs / allowed if allowed > 0 else (0.0 if o.max_abs == 0 else math.inf))
        )
    return max(values, default=None)


METRICS: tuple[Metric, ...] = (
    Metric(
        "max_rel",
        f"worst element-wise relative error over the outputs (values below {MAX_REL_FLOOR:g} count as "
        f"{MAX_REL_FLOOR:g}: near-zero goldens make it jump; prefer error or over_tol)",
        1,
        lambda r: r.worst_max_rel,
        value_floor=MAX_REL_FLOOR,
    ),
    Metric("max_abs", "worst element-wise absolute error over the outputs", 1, _worst_output("max_abs")),
    Metric("median_rel", "worst median relative error over the outputs", 1, _worst_output("median_rel")),
    Metric(
        "error",
        "worst error scaled by the output's largest |golden| (the report's 'worst error'; changes "
        f"below {ERROR_FLOOR:g} are fp32 noise)",
        1,
        lambda r: r.worst_error,
        floor=ERROR_FLOOR,
    ),
    Metric(
        "over_tol",
        "worst max_abs / (atol + rtol x max|golden|): the error in units of the output's tolerance "
        f"(changes below {ERROR_FLOOR:g} are noise)",
        1,
        _over_tolerance,
        floor=ERROR_FLOOR,
    ),
    Metric("lowp_share", "share of FLOPs in fp16/bf16", -1, lambda r: r.lowp_flop_share, share=True),
    Metric(
        "top_token",
        "logits: fraction of positions keeping the golden's argmax token",
        -1,
        _logits("top1_agreement", min),
        share=True,
    ),
    Metric("kl", "logits: mean KL(softmax(golden) || softmax(obtained)), nats", 1, _logits("kl_mean", max), floor=1e-6),
    Metric(
        "casts",
        "Casts the conversion inserted (the model's own Casts are not counted)",
        1,
        lambda r: None if r.cast_count is None else float(r.cast_count),
    ),
    Metric(
        "speedup",
        "measured FP32 latency / low-precision latency on the same GPU runner (CPU runners claim "
        "none and are not judged)",
        -1,
        lambda r: r.speedup,
        floor=SPEEDUP_FLOOR,
    ),
    Metric(
        "convert_time",
        "seconds converting (not judged when the conversion came from the cache)",
        1,
        lambda r: None if r.conversion_cached else r.timings.convert_s,
        floor=TIME_FLOOR_S,
    ),
    Metric("infer_time", "seconds running the converted model", 1, lambda r: r.timings.infer_s, floor=TIME_FLOOR_S),
    Metric(
        "total_time",
        "seconds for the case, without the model's shared magnitudes (not judged when the "
        "conversion came from the cache)",
        1,
        lambda r: None if r.conversion_cached else r.timings.total_s - r.timings.magnitudes_s,
        floor=TIME_FLOOR_S,
    ),
)
VERDICT_RULES = ("status", "trt_build")  # rules on a yes/no verdict: no threshold
METRIC_NAMES = tuple(m.name for m in METRICS) + VERDICT_RULES


def metric(name: str) -> Metric:
    return next(m for m in METRICS if m.name == name)


@dataclass(frozen=True)
class Rule:
    """One parsed rule. ``threshold`` is a fraction for ``%`` and ``pp`` (2pp -> 0.02), else absolute."""

    text: str
    metric: str
    unit: Unit = "status"
    threshold: float = 0.0

    def __post_init__(self) -> None:
        if self.metric not in METRIC_NAMES:
            raise ValueError(f"Rule.metric must be one of {METRIC_NAMES}, got {self.metric!r}")
        if not (self.threshold >= 0 and math.isfinite(self.threshold)):
            raise ValueError(f"Rule.threshold must be finite and >= 0, got {self.threshold!r}")


def parse_rules(texts: str | Sequence[str], *, where: str = OPTION) -> tuple[Rule, ...]:
    """Parse ``"max_rel:+25%,status"`` (or several such strings); raises UserError naming the bad rule."""
    items = [texts] if isinstance(texts, str) else list(texts)
    rules = tuple(parse_rule(part.strip(), where=where) for item in items for part in item.split(",") if part.strip())
    if not rules:
        raise UserError(where=where, problem="no rule given", fix="e.g. max_rel:+25%,lowp_share:-2pp,status")
    seen = [r.metric for r in rules]
    twice = sorted({m for m in seen if seen.count(m) > 1})
    if twice:
        raise UserError(where=where, problem=f"more than one rule for {', '.join(twice)}", fix="keep one per metric")
    return rules


def parse_rule(text: str, *, where: str = OPTION) -> Rule:
    """One rule such as ``max_rel:+25%``, ``lowp_share:-2pp``, ``max_abs:+0.01`` or ``status``."""
    name, colon, spec = text.partition(":")
    here = f"{where} rule {text!r}"
    if name not in METRIC_NAMES:
        close = difflib.get_close_matches(name, METRIC_NAMES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(where=here, problem=f"unknown metric {name!r}", fix=f"{hint}metrics: {', '.join(METRIC_NAMES)}")
    if name in VERDICT_RULES:
        if colon:
            raise UserError(where=here, problem=f"{name} takes no threshold", fix=f"write it as: {name}")
        return Rule(text=text, metric=name)
    known = metric(name)
    match = _RULE.match(spec)
    if not colon or match is None:
        raise UserError(
            where=here,
            problem="expected METRIC:[+|-]NUMBER[%|pp]",
            fix=f"e.g. {name}:{'+' if known.worse > 0 else '-'}25%",
        )
    sign, unit = match["sign"], match["unit"] or "abs"
    bad_way = "+" if known.worse > 0 else "-"
    if sign and sign != bad_way:
        raise UserError(
            where=here,
            problem=f"{name} gets worse when it {'grows' if known.worse > 0 else 'shrinks'}, "
            f"so {sign}{match['number']} would flag improvements",
            fix=f"write {name}:{bad_way}{match['number']}{match['unit'] or ''}",
        )
    if unit == "pp" and not known.share:
        raise UserError(
            where=here,
            problem=f"percentage points (pp) apply to shares only; {name} is not a share",
            fix=f"use a relative change such as {name}:{bad_way}25%",
        )
    value = float(match["number"])
    threshold = value / 100.0 if unit in ("%", "pp") else value
    return Rule(text=text, metric=name, unit=unit, threshold=threshold)  # type: ignore[arg-type]


def describe_rules(rules: Iterable[Rule]) -> str:
    return ", ".join(r.text for r in rules)
