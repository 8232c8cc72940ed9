"""A few-MB model saved with external data: the CI-sized stand-in for a multi-GB model (not a test module)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.helpers.graphs import make_model


def matmul_stack(*, k: int = 512, layers: int = 4, seed: int = 0) -> onnx.ModelProto:
    """x[1,k] -> layers x (MatMul W_i[k,k] -> Tanh) -> y: k*k*4 bytes of weights per layer (1 MiB at k=512)."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((k, k)) / np.sqrt(k)).astype(np.float32), f"W{i}"))
        nodes += [
            helper.make_node("MatMul", [prev, f"W{i}"], [f"mm{i}"], name=f"matmul{i}"),
            helper.make_node("Tanh", [f"mm{i}"], [f"h{i}"], name=f"tanh{i}"),
        ]
        prev = f"h{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, k])], [("y", TensorProto.FLOAT, [1, k])], initializers=inits)


def save_external(model: onnx.ModelProto, path: Path, *, location: str = "weights.bin") -> Path:
    """Save with every tensor of 1 KiB or more in one external data file beside the model."""
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=1024,
    )
    return path
