"""What a failed reference run says: onnxruntime's refusal (:func:`refused_error`, naming the node and its op where
onnxruntime's message names one) or the child's crash (:func:`crash_error`), each as one
:class:`~harness.core.errors.ConversionError` with the fix.
"""

from __future__ import annotations

import re

import onnx

from harness.convert.graphbuilder import PREFIX
from harness.core.child import ChildFailed
from harness.core.errors import ConversionError

_NODE_PATTERNS = (
    re.compile(r"node with name '([^']+)'"),
    re.compile(r"Name:'([^']+)'"),
    re.compile(r"[Nn]ode \(([^)]+)\)"),
    re.compile(r"node name: ([^\s,)]+)"),
)


class ReferenceRunError(ConversionError):
    """onnxruntime refused the model in the reference run: ``stage`` "load" (no kernel, bad model) or "run" (the
    data); ``node``: the node onnxruntime named, if any."""

    def __init__(self, *, stage: str, problem: str, fix: str, node: str | None = None) -> None:
        self.stage = stage
        super().__init__(where="reference run", problem=problem, fix=fix, node=node, step="reference run")


def refused_error(message: str, *, stage: str, model: onnx.ModelProto, source: str) -> ReferenceRunError:
    """onnxruntime could not ``stage`` ("load", "run") ``model`` on the data ``source``: the node its ``message``
    names, with its op (or the model's few ops), and the fix."""
    node = next((m.group(1) for p in _NODE_PATTERNS if (m := p.search(message))), None)
    ops = {n.name: n.op_type for n in model.graph.node if not n.name.startswith(PREFIX + "/")}
    op = f" (op {ops[node]})" if node in ops else ""
    if not op and len(set(ops.values())) <= 3 and not any(t in message for t in ops.values()):
        op = f" (ops in the model: {', '.join(sorted(set(ops.values())))})"
    return ReferenceRunError(
        stage=stage,
        node=node,
        problem=f"onnxruntime cannot {stage} the model{op} on {source}: {message.strip()[:1500]}",
        fix="give representative calibration data (calibration_data=... / --calibration_data) "
        "or input shapes, or skip the run with data_max=inf",
    )


def crash_error(failed: ChildFailed, running_on: str) -> ConversionError:
    """The reference run's process gave no result: a signal (SIGFPE: an integer division by zero, the random
    data's doing, not the model's), a non-zero exit or no answer."""
    if failed.signal == "SIGFPE":
        return ReferenceRunError(
            stage="run",
            problem=f"onnxruntime crashed with SIGFPE (an integer division by zero) running the model on {running_on}",
            fix="give representative calibration data (calibration_data=... / --calibration_data), or skip the "
            "run with data_max=inf",
        )
    if failed.kind == "signal":
        return ConversionError(
            where="reference run",
            step="reference run",
            problem=f"onnxruntime crashed with {failed.signal} running the model on {running_on}",
            fix="give representative calibration data (calibration_data=...) or skip the run with data_max=inf",
        )
    return ConversionError(
        where="reference run",
        step="reference run",
        problem=f"the reference process failed (rc={failed.returncode}): {failed.stderr.strip()[-2000:]}",
        fix="check that onnxruntime can load this model",
    )
