"""What "valid" means for a converted ONNX node test (used by the node-test tests and benchmarks/node_tests.py).

``onnx.checker`` full check (strict inference), the graph's inputs and outputs keep their names and shapes,
and onnxruntime's CPU provider loads the model, unless it lacks a kernel (most bf16 ops), its own function
expansion of ``Attention`` fails in bf16 ("Type parameter (T) of Optype (MatMul) bound to different types"; the
fp16 conversion loads), or it cannot load the input model either (e.g. StringNormalizer without a locale).
"""

from __future__ import annotations

import onnx


def _io(model: onnx.ModelProto) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (v.name, tuple(d.dim_param or str(d.dim_value) for d in v.type.tensor_type.shape.dim))
        for v in [*model.graph.input, *model.graph.output]
    ]


def _ort_error(model: onnx.ModelProto) -> str | None:
    import onnxruntime as ort

    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - onnxruntime's error classes are private
        return str(err)
    return None


def validity_problem(source: onnx.ModelProto, converted: onnx.ModelProto, *, low: str) -> str | None:
    """Why ``converted`` (``source`` in ``low`` precision) is not a valid conversion; None when it is."""
    try:
        onnx.checker.check_model(converted, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        return f"onnx.checker: {str(err).strip()[:300]}"
    if _io(converted) != _io(source):
        return f"graph inputs/outputs changed: {_io(source)} -> {_io(converted)}"
    text = _ort_error(converted)
    if text is None:
        return None
    lacks_kernel = "NOT_IMPLEMENTED" in text or "Could not find an implementation" in text
    bf16_expansion = (
        low == "bf16" and "bound to different types" in text and {n.op_type for n in source.graph.node} == {"Attention"}
    )
    if lacks_kernel or bf16_expansion or _ort_error(source) is not None:
        return None
    return f"onnxruntime rejects it: {text[:300]}"
