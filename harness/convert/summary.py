"""The conversion's log: at INFO one line per reason (count and the first few nodes) and the totals (nodes,
FLOP share, Casts inserted); at DEBUG one line per node with its full reason."""

from __future__ import annotations

import logging

import onnx

from harness.convert.decision import Decision
from harness.convert.flops import FlopCount
from harness.convert.options import ConvertOptions

LOG = logging.getLogger("harness.convert")


SUMMARY_EXAMPLES = 3
"""Node names shown per reason at INFO (``log_level DEBUG`` lists every node)."""


def _reason_kind(reason: str) -> str:
    """The rule behind a reason: its text before the first ':' (``data_max``, ``schema``, ``init_max``...)."""
    return reason.partition(":")[0] or reason


def log_summary(
    options: ConvertOptions, decisions: dict[str, Decision], nodes: list[onnx.NodeProto], flops: FlopCount, casts: int
) -> None:
    """INFO: one summary line per reason (count and the first few nodes); DEBUG: one line per node."""
    low = sum(1 for n in nodes if decisions[n.name].is_low)
    groups: dict[str, list[str]] = {}
    for node in nodes:
        decision = decisions[node.name]
        where = "out of" if not decision.is_low else "in"
        if not decision.is_low or decision.reason:
            LOG.debug(
                "node %s (%s) %s %s: %s",
                node.name,
                node.op_type,
                where,
                options.low_precision_type,
                decision.reason or "fp32",
            )
            key = (
                f"{'kept out of' if not decision.is_low else 'in'} {options.low_precision_type}: "
                f"{_reason_kind(decision.reason or 'fp32')}"
            )
            groups.setdefault(key, []).append(node.name)
    for key, names in groups.items():
        shown = ", ".join(names[:SUMMARY_EXAMPLES]) + (", ..." if len(names) > SUMMARY_EXAMPLES else "")
        LOG.info("%d node(s) %s (%s)", len(names), key, shown)
    if groups:
        LOG.info("(--log_level DEBUG lists every node with its full reason)")
    LOG.info(
        "Converted %d/%d nodes (%.2f%%) to %s; %s%.2f%% of %.3g estimated FLOPs in %s%s%s; %d Casts inserted "
        "(in the converted model; the model's own Casts, re-targeted ones included, are not counted)",
        low,
        len(nodes),
        100.0 * low / max(len(nodes), 1),
        options.low_precision_type,
        "<= " if flops.bound else "",
        100.0 * flops.share,
        flops.total,
        options.low_precision_type,
        f" ({flops.unknown} nodes with unknown shapes not counted)" if flops.unknown else "",
        f" (a bound: {flops.bound})" if flops.bound else "",
        casts,
    )
