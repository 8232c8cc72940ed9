"""The accuracy bound a tuned plan must meet, and its measurement against FP32 goldens (pure numpy).

Per output, the error is the normalized max error over every calibration input::

    error = max over inputs and elements |y - gold|  /  max over inputs and elements |gold|

measured on ``emulate`` against ORT FP32. A non-finite ``y`` where the golden is finite is an infinite error.
Defaults: 1e-3 for fp16 (NVIDIA's stated fp16 expectation), 1e-2 for bf16 (about 8 bf16 ulps of the largest
value). Two optional extra criteria: the harness's per-output tolerance policy (``harness.judge.tolerances``), and
top-1 agreement of classifier outputs (argmax over the last axis).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.core.errors import UserError
from harness.judge.compare import CompareResult, Tolerance, compare_iterations
from harness.judge.tolerances import TolerancePolicy

DEFAULT_MAX_ERROR: dict[str, float] = {"fp16": 1e-3, "bf16": 1e-2}
Outputs = Sequence[Mapping[str, np.ndarray]]


def _bad_bound(value: object, problem: str) -> UserError:
    return UserError(
        where="--max_error",
        problem=f"{problem}: {value!r}",
        fix="give a positive finite number (e.g. --max_error 1e-3), or per output "
        "NAME=E[,NAME=E] (e.g. --max_error logits=1e-3,boxes=5e-3)",
    )


def parse_max_error(text: str | None) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """``"1e-3"`` -> (1e-3, ()); ``"a=1e-3,b=2e-3"`` -> (None, (("a", 1e-3), ("b", 2e-3))); None -> (None, ())."""
    if text is None:
        return None, ()
    default: float | None = None
    per_output: list[tuple[str, float]] = []
    for item in (part.strip() for part in str(text).split(",")):
        if not item:
            raise _bad_bound(text, "empty entry")
        name, sep, number = item.rpartition("=")
        value = _positive(number if sep else item, text)
        if sep:
            if not name.strip():
                raise _bad_bound(text, "missing output name before '='")
            per_output.append((name.strip(), value))
        elif default is not None:
            raise _bad_bound(text, "two bounds without an output name")
        else:
            default = value
    return default, tuple(per_output)


def _positive(number: str, text: object) -> float:
    try:
        value = float(number)
    except ValueError:
        raise _bad_bound(text, "not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise _bad_bound(text, "the bound must be a positive finite number")
    return value


@dataclass(frozen=True)
class Bound:
    """What a plan must meet on every calibration input; see the module docstring."""

    precision: str = "fp16"
    max_error: float | None = None
    """Bound for every output without its own entry; None = the precision's default."""
    per_output: tuple[tuple[str, float], ...] = ()
    use_policy: bool = False
    """Also require the harness's precision-aware tolerance policy (``policy``) to pass."""
    policy: TolerancePolicy = TolerancePolicy()
    top1_outputs: tuple[str, ...] = ()
    min_top1: float = 1.0

    def __post_init__(self) -> None:
        if self.precision not in DEFAULT_MAX_ERROR:
            raise UserError(
                where="--low_precision_type", problem=f"unknown precision {self.precision!r}", fix="use fp16 or bf16"
            )
        for value in (self.max_error, *(v for _, v in self.per_output)):
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise _bad_bound(value, "the bound must be a positive finite number")
        if not 0.0 < self.min_top1 <= 1.0:
            raise UserError(
                where="--min_top1",
                problem=f"{self.min_top1!r} is not a fraction in (0, 1]",
                fix="give e.g. --min_top1 0.99 (1.0 = every argmax must agree)",
            )

    def limit(self, output: str) -> float:
        """The max-error bound of one output."""
        given = dict(self.per_output)
        if output in given:
            return given[output]
        return self.max_error if self.max_error is not None else DEFAULT_MAX_ERROR[self.precision]

    def check_outputs(self, names: Sequence[str]) -> None:
        """Every output named by the bound must exist."""
        for option, wanted in (("--max_error", [n for n, _ in self.per_output]), ("--top1_outputs", self.top1_outputs)):
            unknown = sorted(set(wanted) - set(names))
            if unknown:
                raise UserError(
                    where=option, problem=f"no model output named {unknown}", fix=f"use output names from {list(names)}"
                )

    def describe(self) -> dict[str, object]:
        """The bound as the plan JSON records it."""
        doc: dict[str, object] = {
            "metric": "max|y - gold| / max|gold| per output over all calibration inputs",
            "max_error": self.max_error if self.max_error is not None else DEFAULT_MAX_ERROR[self.precision],
            "per_output": dict(self.per_output),
            "tolerance_policy": self.use_policy,
        }
        if self.top1_outputs:
            doc["top1"] = {"outputs": list(self.top1_outputs), "min_agreement": self.min_top1}
        return doc


@dataclass(frozen=True)
class Measurement:
    """One plan's errors per output, top-1 agreement, and whether the bound holds."""

    errors: tuple[tuple[str, float], ...]
    top1: tuple[tuple[str, float], ...] = ()
    policy_failures: tuple[str, ...] = ()
    passed: bool = False
    ratio: float = 0.0
    """max over outputs of error / its limit (above 1: the max-error bound fails); inf for a non-finite output."""

    def error_of(self, name: str) -> float:
        return dict(self.errors)[name]

    def worst_output(self) -> str:
        return max(self.errors, key=lambda item: item[1])[0] if self.errors else ""


ERROR_CHUNK = 1 << 16
"""Elements of an output widened to float64 at a time by :func:`error_and_scale` (512 KB temporaries: in cache)."""
_NATIVE_FLOATS = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})


def scaled_error(pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> float:
    """max |y - gold| / max |gold| over (y, gold) pairs, on the positions where gold is finite (inf when y is
    non-finite there; 0/0 = 0)."""
    return scaled(*error_and_scale(pairs))


def scaled(diff: float, scale: float) -> float:
    """``diff / scale`` (0/0 = 0, x/0 = inf)."""
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def error_and_scale(pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """(max |y - gold|, max |gold|) over (y, gold) pairs, on the positions where gold is finite (the first inf
    when y is non-finite there), in one pass of float64 temporaries a cache-sized chunk at a time."""
    worst_diff, scale = 0.0, 0.0
    for got_raw, gold_raw in pairs:
        got_flat, gold_flat = np.asarray(got_raw).ravel(), np.asarray(gold_raw).ravel()
        for start in range(0, gold_flat.size, ERROR_CHUNK):  # float64 temporaries of a chunk, not of the output
            gold = np.array(gold_flat[start : start + ERROR_CHUNK], dtype=np.float64)  # its own: |gold| in place
            got = np.asarray(got_flat[start : start + ERROR_CHUNK], dtype=np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                diff = np.subtract(got, gold)
                common = math.isfinite(float(np.add.reduce(diff)))  # both finite everywhere (no float64 overflow)
            if not common:
                finite = np.isfinite(gold)  # only where the golden is finite
                if not finite.any():
                    continue
                gold, diff = gold[finite], diff[finite]
                if not np.isfinite(diff).all():  # y is not finite where gold is
                    worst_diff = math.inf
                    diff = diff[:0]
            scale = max(scale, float(np.abs(gold, out=gold).max(initial=0.0)))
            worst_diff = max(worst_diff, float(np.abs(diff, out=diff).max(initial=0.0)))
    return worst_diff, scale


def normalized_errors(
    obtained: Outputs, goldens: Outputs, *, known: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Per output: max |y - gold| / max |gold| over every input (inf when y is non-finite where gold is not).
    ``known``: outputs whose error is already known (:func:`measure`), not measured again."""
    known = known or {}
    return {
        name: known[name]
        if name in known
        else scaled_error((got_it[name], gold_it[name]) for got_it, gold_it in zip(obtained, goldens))
        for name in goldens[0]
    }


def golden_scales(goldens: Outputs) -> dict[str, float]:
    """Per output, max |gold| over the finite values of every input: :func:`error_and_scale`'s second figure, which
    depends on the goldens alone (an oracle measures it once, not once per plan). The values' own type suffices:
    ``|x|`` and the maximum are exact in it."""
    scales: dict[str, float] = {}
    for name in goldens[0]:
        scale = 0.0
        for gold_it in goldens:
            flat = np.asarray(gold_it[name]).ravel()
            native = flat.dtype in _NATIVE_FLOATS  # others (ints: |-128| of an int8, bfloat16) in float64
            for start in range(0, flat.size, ERROR_CHUNK):
                chunk = flat[start : start + ERROR_CHUNK]
                part = np.abs(chunk if native else np.asarray(chunk, dtype=np.float64))
                top = float(part.max(initial=0))
                if not math.isfinite(top):
                    top = float(part[np.isfinite(part)].max(initial=0))
                scale = max(scale, top)
        scales[name] = scale
    return scales


def _from_comparison(comparison: CompareResult, scales: Mapping[str, float]) -> dict[str, float]:
    """The normalized errors a policy comparison already holds: where an output's max abs error is finite, it is
    max |y - gold| over the positions where gold is finite (every other position matched its golden's NaN or inf,
    or the max would be inf), which is :func:`error_and_scale`'s first figure. Others are measured apart."""
    return {
        out.name: scaled(out.max_abs, scales[out.name])
        for out in comparison.outputs
        if out.name in scales and math.isfinite(out.max_abs)
    }


def top1_agreement(obtained: Outputs, goldens: Outputs, name: str) -> float:
    """Fraction of rows (all axes but the last) whose argmax over the last axis agrees with the golden's."""
    hits = total = 0
    for got_it, gold_it in zip(obtained, goldens):
        gold = np.asarray(gold_it[name], dtype=np.float64)
        got = np.nan_to_num(np.asarray(got_it[name], dtype=np.float64), nan=-np.inf)
        hits += int((got.argmax(axis=-1) == gold.argmax(axis=-1)).sum())
        total += int(np.prod(gold.shape[:-1], dtype=np.int64))
    return hits / total if total else 1.0


def measure(
    obtained: Outputs, goldens: Outputs, bound: Bound, *, scales: Mapping[str, float] | None = None
) -> Measurement:
    """Errors of ``obtained`` against ``goldens`` and the bound's verdict. ``scales``: :func:`golden_scales` of
    ``goldens``; with the tolerance policy, each output's error is then read from the policy's comparison (one
    pass over the outputs instead of two) wherever that comparison holds it."""
    top1 = tuple((name, top1_agreement(obtained, goldens, name)) for name in bound.top1_outputs)
    policy_failures: tuple[str, ...] = ()
    known: dict[str, float] = {}
    if bound.use_policy:
        tolerances = bound.policy.tolerances_for(precision=bound.precision, goldens=list(goldens))
        comparison = compare_iterations(
            list(obtained), list(goldens), tolerances=tolerances, default=Tolerance(), full=False
        )
        policy_failures = tuple(o.name for o in comparison.outputs if not o.passed) + comparison.missing
        known = _from_comparison(comparison, scales) if scales is not None else {}
    errors = normalized_errors(obtained, goldens, known=known)
    passed = (
        all(errors[n] <= bound.limit(n) for n in errors)
        and all(a >= bound.min_top1 for _, a in top1)
        and not policy_failures
    )
    ratio = max((e / bound.limit(n) for n, e in errors.items()), default=0.0)
    return Measurement(
        errors=tuple(errors.items()), top1=top1, policy_failures=policy_failures, passed=passed, ratio=ratio
    )
