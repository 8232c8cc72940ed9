"""Issue 23 item 9: a TensorRT builder failure names the ONNX node and op, not a bare DOES NOT BUILD.

The builder's text is TensorRT-RTX 1.7.1.116's recorded answer for a bf16 ConvTranspose (shared/reference/
tensorrt_rtx_ops.json, a one-node probe model whose node is ``convtranspose``, tensors ``x`` -> ``y``); no TensorRT
is needed. The ``trt_build`` test at the end builds for real where TensorRT-RTX is installed.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness import ConvertOptions, collect_magnitudes, convert_model
from harness.report.model import CaseRecord
from harness.report.serde import record_from_dict, record_to_dict
from harness.report.trt_view import trt_cell
from harness.runners.tensorrt.blame import BuildCulprit, blame_build_error
from harness.runners.tensorrt.library import installed_module
from harness.runners.tensorrt.typed_build import build_from_dict, build_to_dict, check_build, interpret
from harness.sweep import SweepPoint
from tests.helpers.trt_models import conv_transpose_net

MYELIN = (
    "IBuilder::buildSerializedNetwork: Error Code 1: Myelin ([type.cpp:186: infer_type] Could not infer output "
    "types for operation:    31: deconv: y-(bf16[2,4,8,8][]so[3,2,1,0]p[0,0,0,0], mem_prop=0, align=2) | "
    "x-(bf16[2,4,8,8][]so[3,2,1,0]p[0,0,0,0], mem_prop=0, align=2), convtranspose filterWeightsBFloat16-{0.625, "
    "0.628906, 1.13281, 0.601562, 1.03125, 0.859375, 1.79688, 1.44531, ...}(bf16[4,4,3,3][36,9,3,1]so[3,2,1,0], "
    "mem_prop=0, align=2)<entry>, __mye32convtranspose_alpha-1F:(f32[][]so[], mem_prop=0, align=4)<entry>, "
    "__mye33convtranspose)"
)
BACKEND = "TensorRT-RTX 1.7.1.116"


def probe_model() -> onnx.ModelProto:
    """The probe's model: x bf16[2,4,8,8] -> ConvTranspose 'convtranspose' (3x3, pad 1) -> y; plus a Relu after."""
    w = helper.make_tensor("W", TensorProto.BFLOAT16, [4, 4, 3, 3], np.ones(144, np.float32).tolist())
    nodes = [
        helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="convtranspose", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["y"], ["z"], name="relu"),
    ]
    bf16 = TensorProto.BFLOAT16
    graph = helper.make_graph(
        nodes,
        "probe",
        [helper.make_tensor_value_info("x", bf16, [2, 4, 8, 8])],
        [helper.make_tensor_value_info("z", bf16, [2, 4, 8, 8])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _answer(error: str, layers: list[list[object]]) -> dict[str, object]:
    return {
        "stage": "build",
        "parse_s": 0.002,
        "build_s": 0.004,
        "plan_bytes": None,
        "parse_errors": [],
        "node_types": {"convtranspose": ["BF16"], "relu": ["BF16"]},
        "layers": layers,
        "log": [["ERROR", error]],
    }


def test_the_recorded_myelin_error_names_the_node_and_its_op() -> None:
    layers = [["convtranspose", "DECONVOLUTION", ["BF16"]], ["relu", "ACTIVATION", ["BF16"]]]
    build = interpret(probe_model(), _answer(MYELIN, layers), backend=BACKEND)
    assert build.outcome == "build" and build.build_error == MYELIN
    (first,) = build.build_culprits
    assert (first.node, first.op, first.dtype) == ("convtranspose", "ConvTranspose", "bf16")
    assert build.summary().startswith(
        f"does not build in {BACKEND}: the builder failed at node convtranspose (ConvTranspose, bf16; "
    )
    assert build_from_dict(json.loads(json.dumps(build_to_dict(build)))) == build
    record = CaseRecord(
        model="m", model_sha256="0" * 64, case=SweepPoint(precision="bf16"), status="pass", trt_build=build
    )
    assert trt_cell(record) == "DOES NOT BUILD: ConvTranspose (bf16) at node convtranspose"
    assert record_from_dict(json.loads(json.dumps(record_to_dict(record)))) == record


def _bf16_torch_style() -> onnx.ModelProto:
    """conv_transpose_net converted to bf16, its nodes renamed as torch exports them."""
    model = conv_transpose_net()
    for node in model.graph.node:
        node.name = {"up": "/decoder/up/ConvTranspose", "act": "/decoder/act/Relu"}[node.name]
    return convert_model(
        model, options=ConvertOptions(low_precision_type="bf16"), magnitudes=collect_magnitudes(model, seed=0)
    ).model


def _as_if_from(model: onnx.ModelProto) -> str:
    """The recorded message as TensorRT writes it for `model`: its layer name and tensor names in place of the
    probe's (``convtranspose``; ``y`` out, ``x`` in)."""
    node = next(n for n in model.graph.node if n.op_type == "ConvTranspose")
    return (
        MYELIN.replace("convtranspose filterWeights", f"{node.name} filterWeights")
        .replace("deconv: y-(", f"deconv: {node.output[0]}-(")
        .replace("| x-(", f"| {node.input[0]}-(")
    )


def test_a_converted_model_is_blamed_by_its_layer_name_with_the_parsers_layers() -> None:
    model = _bf16_torch_style()
    layers = [[n.name, "X", ["BF16"]] for n in model.graph.node]
    culprits = blame_build_error(model, _as_if_from(model), layers=layers)
    assert [(c.node, c.op, c.dtype) for c in culprits] == [("/decoder/up/ConvTranspose", "ConvTranspose", "bf16")]
    assert "is named in the builder's error" in culprits[0].evidence


def test_a_suffixed_layer_maps_to_its_node() -> None:
    model = _bf16_torch_style()
    text = MYELIN.replace("convtranspose filterWeights", "/decoder/up/ConvTranspose_1 filterWeights")
    (culprit,) = blame_build_error(model, text, layers=[["/decoder/up/ConvTranspose_1", "DECONVOLUTION", []]])
    assert culprit.node == "/decoder/up/ConvTranspose" and "layer '/decoder/up/ConvTranspose_1'" in culprit.evidence


def test_without_a_layer_name_the_output_tensor_then_the_myelin_kind_decide() -> None:
    model = _bf16_torch_style()
    node = next(n for n in model.graph.node if n.op_type == "ConvTranspose")
    by_tensor = _as_if_from(model).replace(f"{node.name} filterWeights", "weights filterWeights")
    (culprit,) = blame_build_error(model, by_tensor)
    assert culprit.node == node.name and repr(node.output[0]) in culprit.evidence
    by_kind = "Myelin ([type.cpp:186: infer_type] Could not infer output types for operation:    31: deconv: t-(bf16)"
    (culprit,) = blame_build_error(model, by_kind)
    assert culprit.node == node.name and "'deconv'" in culprit.evidence


def test_an_error_naming_nothing_blames_nothing_and_keeps_the_text() -> None:
    build = interpret(probe_model(), _answer("Internal Error (out of memory)", []), backend=BACKEND)
    assert build.build_culprits == ()
    assert build.summary() == f"does not build in {BACKEND}: Internal Error (out of memory)"
    two = probe_model()
    two.graph.node.append(helper.make_node("ConvTranspose", ["z", "W"], ["q"], name="second"))
    assert blame_build_error(two, "for operation: 3: deconv: t-(bf16)") == ()  # two candidates: no guess


def test_a_name_inside_a_longer_word_is_not_evidence() -> None:
    assert blame_build_error(probe_model(), "__mye33convtranspose failed; relux") == ()
    assert BuildCulprit("n", "Op", "", "e") == BuildCulprit(node="n", op="Op", dtype="", evidence="e")


@pytest.mark.trt_build
@pytest.mark.skipif(installed_module() is None, reason='no TensorRT module is installed: pip install "castguard[trt]"')
def test_a_real_builder_failure_names_the_conv_transpose() -> None:
    model = _bf16_torch_style()
    build = check_build(model, model_dir=None)
    assert build.outcome == "build", build.summary()
    assert [c.node for c in build.build_culprits][:1] == ["/decoder/up/ConvTranspose"], build.summary()
    assert dataclasses.replace(build, build_culprits=()).summary() != build.summary()
