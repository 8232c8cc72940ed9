"""Cases that convert to the same model run once: the others reuse its result (``CaseRecord.reused_from``). No pytest.

Two sweep cases often differ only in a setting that changes nothing on a given model (an excluded op that sits
between low-precision ops, a data_max no activation reaches, keep_io_types on a model whose inputs are
rounded anyway). :func:`model_digest` hashes the converted graph (deterministic protobuf serialization); cases
of one model with the same digest and the same runner (and providers) would compute bit-identical outputs,
so :class:`SameModels` keeps the first case's record and the others reuse it. Cases whose *precision plans*
are identical (the same nodes in low precision, the same clamped initializers, the same graph IO types) but
whose graphs differ (an initializer stored in fp32 and cast at run time instead of stored in fp16, node order)
compute the same values on runners that follow the plan exactly (their traits declare ``computes_exact_plan``: emulate rounds every
low-precision tensor, reference likewise), so there they are reused too (``reuse_kind="plan"``); on other runners
(trt, ort) they run, naming the first case of that plan (``CaseRecord.same_plan_as``).
Not caught yet: plans that differ only by a node kept in fp32 between low-precision neighbours, whose output is
rounded by the next op anyway (the same values under emulate). Measured on a 6-block timm ViT-tiny export
(random weights): the 12 default cases gave 2 distinct results (one per precision), and 4 of the 12 were
recognised as duplicates. The memory is per process (under xdist each worker runs its own first case).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import onnx

from harness.convert import ConversionResult
from harness.report import CaseRecord


def model_digest(model: onnx.ModelProto) -> str:
    """sha256 of the converted model's deterministic serialization."""
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()


def plan_digest(conversion: ConversionResult, *, precision: str, fp32_accumulation: bool = False) -> str:
    """sha256 of the precision plan: which nodes run in low precision, which stay in fp32 (and why), which
    initializers were clamped, whether MatMuls accumulate in fp32, and the graph's input and output types (with
    keep_io_types off, an FP32 node that reads a graph input reads it rounded, so the same node plan can give
    other values)."""
    graph = conversion.model.graph
    io_types = sorted((v.name, v.type.tensor_type.elem_type) for v in [*graph.input, *graph.output])
    plan = [
        precision,
        sorted(conversion.low_nodes),
        sorted(list(p) for p in conversion.high_nodes),
        sorted(conversion.clamped),
        fp32_accumulation,
        io_types,
    ]
    return hashlib.sha256(json.dumps(plan).encode()).hexdigest()


@dataclass
class SameModels:
    """The first record per converted-model digest and per precision plan (each key also holds the model, its
    inputs, the runner and its providers)."""

    _models: dict[tuple[str, ...], CaseRecord] = field(default_factory=dict)
    _plans: dict[tuple[str, ...], CaseRecord] = field(default_factory=dict)

    def first(self, graph: tuple[str, ...], plan: tuple[str, ...], *, by_plan: bool) -> tuple[CaseRecord, str] | None:
        """The earlier record this case can reuse and how it matched (``"graph"``: an identical converted graph;
        ``"plan"``, only when ``by_plan``: the runner computes the same values for the same plan), else None."""
        if graph in self._models:
            return self._models[graph], "graph"
        if by_plan and plan in self._plans:
            return self._plans[plan], "plan"
        return None

    def first_of_plan(self, plan: tuple[str, ...]) -> str | None:
        """The case id of the first case with this precision plan (for a case that runs anyway: a runner whose
        kernels may differ), else None."""
        first = self._plans.get(plan)
        return None if first is None else first.case_id

    def remember(self, graph: tuple[str, ...], plan: tuple[str, ...], record: CaseRecord) -> None:
        """Keep a record that really ran (errors are not reused: the next case tries again)."""
        if record.status in ("pass", "fail", "skip") and record.outputs:
            self._models.setdefault(graph, record)
            self._plans.setdefault(plan, record)
