"""Sensitivity of each candidate node, measured in one onnxruntime run (not counted as a plan evaluation).

The probe model is the FP32 model (as the converter prepares it: same node names) plus, for every candidate
node, a clone whose float inputs are rounded to the low type (``Cast(to=low) -> Cast(to=FLOAT)``, as the
converted model stores them) and whose float outputs are rounded the same way. One run over the calibration
inputs gives, per candidate, its *local error*::

    local(n) = max over its float outputs of  max |clone - fp32| / max |fp32|

i.e. what rounding that one node (its inputs, its weights and its result) does to its own output, with every
other node exact. Overflow, underflow, catastrophic cancellation (``Sub`` of two nearly equal values) and
division by rounded small numbers show up here. A node whose *output* feeds such a consumer is blamed with the
consumer's local error too, because keeping the consumer FP32 does not help while its input is stored rounded
(the residual ``Add`` before a cancelling ``Sub``): ``sensitivity(n) = max(local(n), local(consumers of n))``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from harness.convert import ConvertOptions, Magnitudes
from harness.convert.flops import node_flops
from harness.convert.flopshapes import flop_shapes
from harness.convert.graphinfo import build_info
from harness.convert.opset import prepare
from harness.data.feeds import Feed
from harness.runners.ort import CPU, create_session, run_session
from harness.tune.bound import scaled_error

FLOAT = TensorProto.FLOAT
_TAG = "__castguard_probe"


@dataclass(frozen=True)
class Sensitivity:
    """Per candidate: local error, blamed sensitivity, FLOPs, and the consumer that blamed it (if any)."""

    local: Mapping[str, float]
    sensitivity: Mapping[str, float]
    flops: Mapping[str, int]
    blamed_by: Mapping[str, str]

    def to_json(self) -> dict[str, object]:
        enc = {k: ("inf" if math.isinf(v) else v) for k, v in self.local.items()}
        return {
            "local": enc,
            "flops": dict(self.flops),
            "blamed_by": dict(self.blamed_by),
            "sensitivity": {k: ("inf" if math.isinf(v) else v) for k, v in self.sensitivity.items()},
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Mapping[str, object]]) -> Sensitivity:
        return cls(
            local={k: float(v) for k, v in doc["local"].items()},  # type: ignore[arg-type]
            sensitivity={k: float(v) for k, v in doc["sensitivity"].items()},  # type: ignore[arg-type]
            flops={k: int(v) for k, v in doc["flops"].items()},  # type: ignore[call-overload]
            blamed_by={k: str(v) for k, v in doc["blamed_by"].items()},
        )


def _prepared(model: onnx.ModelProto, options: ConvertOptions) -> onnx.ModelProto:
    work = onnx.ModelProto()
    work.CopyFrom(model)
    return prepare(
        work,
        target=options.target_opset,
        low_precision_type=options.low_precision_type,
        custom_ops=set(options.custom_op_precisions()),
    )


def probe_model(
    prepared: onnx.ModelProto, candidates: Sequence[str], types: Mapping[str, int], low: int
) -> tuple[onnx.ModelProto, dict[str, list[tuple[str, str]]]]:
    """The probe model and, per candidate, its (fp32 output, rounded clone output) pairs."""
    probe = onnx.ModelProto()
    probe.CopyFrom(prepared)
    graph = probe.graph
    wanted = set(candidates)
    rounded: dict[str, str] = {}
    extra: list[onnx.NodeProto] = []
    pairs: dict[str, list[tuple[str, str]]] = {}

    def rounding(src: str, dst: str) -> None:
        extra.append(helper.make_node("Cast", [src], [dst + "_low"], to=low, name=dst + "_r"))
        extra.append(helper.make_node("Cast", [dst + "_low"], [dst], to=FLOAT, name=dst + "_w"))

    for index, node in enumerate(list(graph.node)):
        if node.name not in wanted or node.domain not in ("", "ai.onnx"):
            continue
        clone = onnx.NodeProto()
        clone.CopyFrom(node)
        clone.name = f"{node.name}{_TAG}{index}"
        for pos, name in enumerate(node.input):
            if name and types.get(name) == FLOAT:
                if name not in rounded:
                    rounded[name] = f"{name}{_TAG}_in{len(rounded)}"
                    rounding(name, rounded[name])
                clone.input[pos] = rounded[name]
        outs = []
        for pos, name in enumerate(node.output):
            clone.output[pos] = f"{name}{_TAG}{index}_raw{pos}" if name else ""
            if name and types.get(name) == FLOAT:
                final = f"{name}{_TAG}{index}_out{pos}"
                rounding(clone.output[pos], final)
                outs.append((name, final))
        extra.append(clone)
        pairs[node.name] = outs
    graph.node.extend(extra)
    present = {o.name for o in graph.output}
    for outs in pairs.values():
        for name in (n for pair in outs for n in pair):
            if name not in present:
                graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    return probe, pairs


def _local_error(results: Sequence[Mapping[str, np.ndarray]], outs: Sequence[tuple[str, str]]) -> float:
    """The worst scaled error of a node's probe outputs against its exact outputs, over all results."""
    return max(
        (
            scaled_error((result[probe_name], result[exact_name]) for result in results)
            for exact_name, probe_name in outs
        ),
        default=0.0,
    )


def measure_sensitivity(
    model: onnx.ModelProto,
    *,
    options: ConvertOptions,
    magnitudes: Magnitudes,
    candidates: Sequence[str],
    feeds: Sequence[Feed],
) -> Sensitivity:
    """Local errors (one ORT CPU run of the probe model over ``feeds``), blame, and FLOPs per candidate."""
    prepared = _prepared(model, options)
    info = build_info(prepared, observed_types=magnitudes.dtypes)
    probe, pairs = probe_model(prepared, candidates, info.types, options.low_elem)
    session = create_session(probe, providers=(CPU,), runner="tune probe")
    results = [run_session(session, dict(feed), runner="tune probe") for feed in feeds]
    local = {name: _local_error(results, pairs.get(name, [])) for name in candidates}
    nodes = {n.name: n for n in prepared.graph.node}

    shape_of = flop_shapes(prepared, shapes=magnitudes.shapes).dims  # the reference run's, else inferred

    flops = {name: node_flops(nodes[name], shape_of, dict(info.initializers)) or 0 for name in candidates}
    sensitivity, blamed_by = dict(local), {}
    for name in candidates:
        for out in nodes[name].output:
            for index in info.consumers.get(out, ()):
                consumer = prepared.graph.node[index].name
                if consumer in local and local[consumer] > sensitivity[name]:
                    sensitivity[name], blamed_by[name] = local[consumer], consumer
    return Sensitivity(local=local, sensitivity=sensitivity, flops=flops, blamed_by=blamed_by)


def rank(candidates: Sequence[str], sensitivity: Sensitivity) -> list[str]:
    """Candidates in the order they should go back to FP32: highest sensitivity per FLOP gained first
    (the greedy "gain per error" order read backwards); ties keep graph order."""
    total = max(sum(sensitivity.flops.values()), 1)
    order = {name: i for i, name in enumerate(candidates)}

    def key(name: str) -> tuple[float, int]:
        gain = sensitivity.flops.get(name, 0) / total + 1e-6
        value = sensitivity.sensitivity.get(name, 0.0)
        return (-(math.inf if math.isinf(value) else value / gain), order[name])

    return sorted(candidates, key=key)
