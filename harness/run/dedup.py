"""Cases that convert to the same model run once: the others are reported as "same model as <case>". No pytest.

Two sweep cases often differ only in a setting that changes nothing on a given model (an excluded op that sits
between low-precision ops, a data_max no activation reaches, keep_io_types on a model whose inputs are
rounded anyway). :func:`model_digest` hashes the converted graph (deterministic protobuf serialization); cases
of one model with the same digest and the same runner (and providers) would compute bit-identical outputs,
so :class:`SameModels` keeps the first case's record and the others reuse it. Cases whose *precision plans*
are identical (the same nodes in low precision) but whose graphs differ (e.g. only the model's IO types) still
run, with a note naming the first case of that plan. The memory is per process (under xdist each worker runs
its own first case).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

import onnx

from harness.convert import ConversionResult
from harness.report import CaseRecord, Timings
from harness.report.format import SAME_MODEL

SAME_PLAN = "same precision plan as"


def model_digest(model: onnx.ModelProto) -> str:
    """sha256 of the converted model's deterministic serialization."""
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()


def plan_digest(conversion: ConversionResult, *, precision: str) -> str:
    """sha256 of the precision plan: which nodes run in low precision, which stay in fp32 (and why)."""
    plan = [precision, sorted(conversion.low_nodes), sorted(list(p) for p in conversion.high_nodes)]
    return hashlib.sha256(json.dumps(plan).encode()).hexdigest()


@dataclass
class SameModels:
    """The first record per (model, runner, providers, converted-model digest), and the first case per plan."""

    _models: dict[tuple[str, ...], CaseRecord] = field(default_factory=dict)
    _plans: dict[tuple[str, ...], str] = field(default_factory=dict)

    def first(self, key: tuple[str, ...]) -> CaseRecord | None:
        return self._models.get(key)

    def remember(self, key: tuple[str, ...], record: CaseRecord) -> None:
        """Keep a record that really ran (errors are not reused: the next case tries again)."""
        if record.status in ("pass", "fail", "skip") and record.outputs:
            self._models.setdefault(key, record)

    def plan_note(self, key: tuple[str, ...], case_id: str) -> str | None:
        """``same precision plan as <case>`` when an earlier case had this plan, else remember this case."""
        first = self._plans.setdefault(key, case_id)
        return None if first == case_id else f"{SAME_PLAN} {first}"


def reuse(first: CaseRecord, record: CaseRecord, *, convert_s: float, total_s: float) -> CaseRecord:
    """``record`` (this case, converted) completed from the identical model's ``first`` record, without running."""
    note = f"{SAME_MODEL} {first.case_id}"
    message = first.message
    if message:
        message = (f"{record.model} [{record.case_id}] converts to the same model as [{first.case_id}] (identical "
                   f"graph, not run again); its result:\n{message}")
    return replace(first, case=record.case, inputs_id=record.inputs_id, notes=(note, *record.notes),
                   message=message, timings=Timings(convert_s=convert_s, total_s=total_s))
