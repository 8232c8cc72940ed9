"""Can onnxruntime's CPU provider load a bf16 model? It has bf16 kernels for few ops (Cast, shape ops, a handful
of contrib ops), so most converted bf16 models fail to load there. The converter says so in one line, with
the runners that can run the model, instead of leaving the user to find out from an ORT load error.

The kernel list comes from onnxruntime's own registry, read in a child process (:mod:`harness.core.ortenv`): the
call behind it is private and kills the process when onnxruntime-gpu is installed without the CUDA libraries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import onnx
from onnx import TensorProto

from harness.core.ortenv import cpu_bf16_ops
from harness.core.providers import CUDA

LOG = logging.getLogger("harness.convert")
BF16_RUNNERS = f"TensorRT (runner trt), onnxruntime with {CUDA}, castguard's emulate/reference runners"


def bf16_nodes(model: onnx.ModelProto) -> Iterable[onnx.NodeProto]:
    """Top-level nodes reading or writing a bf16 tensor (types from the model's complete value_info)."""
    graph = model.graph
    bf16 = {
        vi.name
        for vi in [*graph.input, *graph.value_info, *graph.output]
        if vi.type.tensor_type.elem_type == TensorProto.BFLOAT16
    }
    bf16 |= {init.name for init in graph.initializer if init.data_type == TensorProto.BFLOAT16}
    return [node for node in graph.node if any(name in bf16 for name in [*node.input, *node.output])]


def note_cpu_bf16(model: onnx.ModelProto) -> tuple[str, ...]:
    """Log one line when the CPU provider has no bf16 kernel for some bf16 node; returns those op types."""
    nodes = list(bf16_nodes(model))
    if not nodes:
        return ()
    supported = cpu_bf16_ops()
    if supported is None:
        LOG.warning(
            "note: this bf16 model may not load in onnxruntime's CPU provider (its kernel list could "
            "not be read here); run it with %s",
            BF16_RUNNERS,
        )
        return ()
    missing = tuple(
        sorted({n.op_type for n in nodes if (("" if n.domain == "ai.onnx" else n.domain), n.op_type) not in supported})
    )
    if missing:
        LOG.warning(
            "note: onnxruntime's CPU provider cannot load this bf16 model (no bf16 kernels for %s); run it with %s",
            ", ".join(missing[:8]) + (", ..." if len(missing) > 8 else ""),
            BF16_RUNNERS,
        )
    return missing
