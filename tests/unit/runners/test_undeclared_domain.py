"""Another converter's output may use com.microsoft ops without declaring the domain (onnxruntime's fusions do;
onnxruntime accepts it, onnx's inference refuses it). Found on the lent GPU: ORT CUDA's CPU-placement check raised
onnx's InferenceError on the ort-fp16 BERT, and that case left no record."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from harness.convert.builtin_converters import _declare_domains
from harness.runners.ort_cuda import float_fallbacks


def fused() -> onnx.ModelProto:
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], name="fm", domain="com.microsoft")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT16, [2, 2]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_the_placement_check_reads_declared_types_where_onnx_cannot_infer() -> None:
    assert float_fallbacks([("fm", "FusedMatMul")], fused()) == ["fm (FusedMatMul)"]


def test_an_undeclared_domain_gets_its_opset_import() -> None:
    model = _declare_domains(fused())
    assert {o.domain: o.version for o in model.opset_import} == {"": 17, "com.microsoft": 1}
    onnx.shape_inference.infer_shapes(model, strict_mode=False)  # inference now accepts it
