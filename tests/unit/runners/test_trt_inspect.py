"""Engine-inspector parsing (10.x and 11.x schemas), dtype rules and the check against ONNX types.

The fixtures are written from the documented formats (shared/reference/tensorrt.md §2.4, NVIDIA/TensorRT#4020,
the Torch-TensorRT explicit-typing log in seed 002): a DETAILED 10.x dump of the bundled explicit_typing
model built strongly typed (Myelin fuses each linear with the cast after it), the same model built weakly
typed (everything fp32, what Torch-TensorRT logged without explicit typing), an 11.x dump, a 10.x dump of a
conv net with reformat layers, and a LAYER_NAMES_ONLY dump.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

import test_models
from harness.core.errors import InputDataError, RunnerError
from harness.runners.tensorrt.datatypes import precision_from_text
from harness.runners.tensorrt.inspector import load_inspector_json, onnx_nodes_of, parse_inspector_json
from harness.runners.tensorrt.precision_diff import Mismatch, check_against_onnx, declared_precisions

EXPLICIT_10X_STRONG = r"""
{"Layers": [
 {"Name": "__myl_MulSumAddCas_myl0_0", "LayerType": "kgen",
  "Inputs": [{"Name": "linear1.bias", "Location": "Device", "Dimensions": [1,10], "Format/Datatype": "Float"},
             {"Name": "__mye112_dconst", "Location": "Device", "Dimensions": [10,10], "Format/Datatype": "Float"},
             {"Name": "x", "Location": "Device", "Dimensions": [1,10], "Format/Datatype": "Float"}],
  "Outputs": [{"Name": "__myln_k_arg__bb1_2", "Location": "Device", "Dimensions": [1,10], "Format/Datatype": "Half"}],
  "TacticName": "__myl_MulSumAddCas_0xacf8f5dd9be2f3e7bb09cdddeac6c936", "StreamId": 0,
  "Metadata": "[ONNX Layer: /linear1/MatMul]\u001e[ONNX Layer: /linear1/Add]\u001e[ONNX Layer: /Cast]"},
 {"Name": "__myl_ResMulSumAddCas_myl0_1", "LayerType": "kgen",
  "Inputs": [{"Name": "__mye127_dconst", "Location": "Device", "Dimensions": [10,30], "Format/Datatype": "Half"},
             {"Name": "linear2.bias", "Location": "Device", "Dimensions": [1,30], "Format/Datatype": "Half"},
             {"Name": "__myln_k_arg__bb1_2", "Location": "Device", "Dimensions": [1,10], "Format/Datatype": "Half"}],
  "Outputs": [{"Name": "__myln_k_arg__bb1_3", "Location": "Device", "Dimensions": [1,30], "Format/Datatype": "Float"}],
  "TacticName": "__myl_ResMulSumAddCas_0x5a3b318b5a1c97b7d5110c0291481337", "StreamId": 0,
  "Metadata": "[ONNX Layer: /linear2/MatMul]\u001e[ONNX Layer: /linear2/Add]\u001e[ONNX Layer: /Cast_1]"},
 {"Name": "__myl_ResMulSumAdd_myl0_2", "LayerType": "kgen",
  "Inputs": [{"Name": "__mye142_dconst", "Location": "Device", "Dimensions": [30,40], "Format/Datatype": "Float"},
             {"Name": "linear3.bias", "Location": "Device", "Dimensions": [1,40], "Format/Datatype": "Float"},
             {"Name": "__myln_k_arg__bb1_3", "Location": "Device", "Dimensions": [1,30], "Format/Datatype": "Float"}],
  "Outputs": [{"Name": "y", "Location": "Device", "Dimensions": [1,40], "Format/Datatype": "Float"}],
  "TacticName": "__myl_ResMulSumAdd_0x3fad91127c640fd6db771aa9cde67db0", "StreamId": 0,
  "Metadata": "[ONNX Layer: /linear3/MatMul]\u001e[ONNX Layer: /linear3/Add]"}
],
"Bindings": ["x", "y"]}
"""

# the same engine built weakly typed: TensorRT ran every layer in fp32 despite the model's fp16 linear2
EXPLICIT_10X_WEAK = EXPLICIT_10X_STRONG.replace('"Half"', '"Float"')

EXPLICIT_11X_STRONG = r"""
{"Layers": [
 {"Name": "{ForeignNode[/linear1/MatMul.../Cast]}", "LayerType": "kgen",
  "Inputs": [{"Name": "x", "Location": "Device", "Dimensions": [1,10], "Datatype": "Float",
              "Format": "Row major linear FP32 format (kLINEAR)"}],
  "Outputs": [{"Name": "__myln_k_arg__bb1_2", "Location": "Device", "Dimensions": [1,10], "Datatype": "Half",
               "Format": "Row major linear FP16 format (kLINEAR)"}],
  "TacticName": "__myl_MulSumAddCas_0xacf8f5dd9be2f3e7bb09cdddeac6c936", "StreamId": 0, "Metadata": ""},
 {"Name": "__myl_ResMulSumAddCas_myl0_1", "LayerType": "kgen",
  "Inputs": [{"Name": "__myln_k_arg__bb1_2", "Location": "Device", "Dimensions": [1,10], "Datatype": "Half",
              "Format": "Row major linear FP16 format (kLINEAR)"}],
  "Outputs": [{"Name": "/Cast_1_output_0", "Location": "Device", "Dimensions": [1,30], "Datatype": "Float",
               "Format": "Row major linear FP32 format (kLINEAR)"}],
  "TacticName": "__myl_ResMulSumAddCas_0x5a3b318b5a1c97b7d5110c0291481337", "StreamId": 0,
  "Metadata": "[ONNX Layer: /linear2/MatMul]\u001e[ONNX Layer: /linear2/Add]\u001e[ONNX Layer: /Cast_1]"},
 {"Name": "/linear3/MatMul + /linear3/Add", "LayerType": "gemm",
  "Inputs": [{"Name": "/Cast_1_output_0", "Location": "Device", "Dimensions": [1,30], "Datatype": "Float",
              "Format": "Row major linear FP32 format (kLINEAR)"}],
  "Outputs": [{"Name": "y", "Location": "Device", "Dimensions": [1,40], "Datatype": "Float",
               "Format": "Row major linear FP32 format (kLINEAR)"}],
  "TacticName": "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8", "StreamId": 0}
],
"I/O Tensors": [
 {"Name": "x", "IOMode": "Input", "DataType": "Float", "Dimensions": [1,10], "Location": "Device",
  "IsShapeInferenceIO": false,
  "ProfileInfo": [{"MinShape": [1,10], "OptShape": [1,10], "MaxShape": [1,10],
                   "Format": "Row major linear FP32 format (kLINEAR)"}]},
 {"Name": "y", "IOMode": "Output", "DataType": "Float", "Dimensions": [1,40], "Location": "Device",
  "IsShapeInferenceIO": false}
]}
"""

MNIST_10X_FP16 = r"""
{"Layers": [
 {"Name": "Reformatting CopyNode for Input Tensor 0 to Convolution28 + Plus30 + ReLU32", "LayerType": "Reformat",
  "Inputs": [{"Name": "Input3", "Location": "Device", "Dimensions": [1,1,28,28], "Format/Datatype": "Row major linear FP32"}],
  "Outputs": [{"Name": "Reformatted Input Tensor 0 to Convolution28 + Plus30 + ReLU32", "Location": "Device",
               "Dimensions": [1,1,28,28], "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}],
  "ParameterType": "Reformat", "Origin": "REFORMAT", "TacticValue": "0x0000000000000000", "StreamId": 0,
  "Metadata": ""},
 {"Name": "Convolution28 + Plus30 + ReLU32", "LayerType": "CaskConvolution",
  "Inputs": [{"Name": "Reformatted Input Tensor 0 to Convolution28 + Plus30 + ReLU32", "Location": "Device",
              "Dimensions": [1,1,28,28], "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}],
  "Outputs": [{"Name": "ReLU32_Output_0", "Location": "Device", "Dimensions": [1,8,28,28],
               "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}],
  "ParameterType": "Convolution", "Kernel": [5,5], "PaddingMode": "kSAME_UPPER", "Groups": 1,
  "Weights": {"Type": "Half", "Count": 200}, "Bias": {"Type": "Half", "Count": 8},
  "TacticName": "sm90_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize32x32x64", "StreamId": 0,
  "Metadata": "[ONNX Layer: Convolution28]\u001e[ONNX Layer: Plus30]\u001e[ONNX Layer: ReLU32]"},
 {"Name": "Pooling66", "LayerType": "CaskPooling",
  "Inputs": [{"Name": "ReLU32_Output_0", "Location": "Device", "Dimensions": [1,8,28,28],
              "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}],
  "Outputs": [{"Name": "Pooling66_Output_0", "Location": "Device", "Dimensions": [1,8,14,14],
               "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}],
  "TacticValue": "0x5faca2a5ad5e0bbc", "StreamId": 0, "Metadata": "[ONNX Layer: Pooling66]"},
 {"Name": "Plus214_Output_0_cast", "LayerType": "Cast", "Origin": "CAST",
  "Inputs": [{"Name": "Times212_Output_0", "Location": "Device", "Dimensions": [1,10], "Format/Datatype": "Row major linear FP16 format"}],
  "Outputs": [{"Name": "Plus214_Output_0", "Location": "Device", "Dimensions": [1,10], "Format/Datatype": "Row major linear FP32 format"}],
  "TacticValue": "0x0", "StreamId": 0, "Metadata": "[ONNX Layer: Plus214_cast]"}
],
"Bindings": ["Input3", "Plus214_Output_0"]}
"""

NAMES_ONLY_10X = json.dumps(
    {
        "Layers": [
            "Reformatting CopyNode for Input Tensor 0 to Convolution28 + Plus30 + ReLU32",
            "Convolution28 + Plus30 + ReLU32",
            "{ForeignNode[/linear1/MatMul.../Cast]}",
            "__myl_Mul_myl0_0",
        ],
        "Bindings": ["Input3", "Plus214_Output_0"],
    }
)


@pytest.fixture(scope="module")
def explicit_typing() -> onnx.ModelProto:
    return onnx.load(str(test_models.MODELS["explicit_typing"].path))


# ---------------------------------------------------------------- dtype strings


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Row major linear FP32", "fp32"),
        ("Row major linear FP32 format (kLINEAR)", "fp32"),
        ("Row major linear FP16 format", "fp16"),
        ("Channel major FP16 format where channel % 8 == 0", "fp16"),
        ("Channel major FP32 format where channel % 4 == 0", "fp32"),
        ("Float", "fp32"),
        ("Half", "fp16"),
        ("BFloat16", "bf16"),
        ("BFLOAT16", "bf16"),
        ("Row major linear BF16 format", "bf16"),
        ("Row major Int8 format", "int8"),
        ("Thirty-two wide channel vectorized row major Int8 format", "int8"),
        ("UInt8", "uint8"),
        ("Int32", "int32"),
        ("Int64", "int64"),
        ("Bool", "bool"),
        ("FP8", "fp8"),
        ("Float8E4M3FN", "fp8"),
        ("Int4", "int4"),
        ("FP4", "fp4"),
        ("Float16", "fp16"),
        ("kLINEAR", None),
        ("", None),
    ],
)
def test_precision_from_text(text: str, expected: str | None) -> None:
    assert precision_from_text(text) == expected


def test_bfloat16_is_not_read_as_float() -> None:
    """'FLOAT' is a substring of 'BFLOAT16': the rules must try bf16 first."""
    assert precision_from_text("bfloat16") == "bf16"
    assert precision_from_text("Float8E5M2") == "fp8"


# ---------------------------------------------------------------- 10.x


def test_10x_detailed_dump_of_strongly_typed_explicit_typing(explicit_typing: onnx.ModelProto) -> None:
    report = parse_inspector_json(EXPLICIT_10X_STRONG)
    assert (report.schema, report.detailed) == ("10.x", True)
    assert [layer.precision for layer in report.layers] == ["fp16", "fp32", "fp32"]
    assert report.layers[0].onnx_nodes == ("/linear1/MatMul", "/linear1/Add", "/Cast")
    assert report.layers[0].tactic.startswith("__myl_MulSumAddCas")
    assert [(io.name, io.mode, io.precision) for io in report.io_tensors] == [
        ("x", "input", None),
        ("y", "output", None),
    ]
    assert report.histogram() == {"fp16": 1, "fp32": 2}
    assert report.low_precision_share() == pytest.approx(1 / 3)
    assert check_against_onnx(report, explicit_typing) == []


def test_weakly_typed_engine_is_caught(explicit_typing: onnx.ModelProto) -> None:
    mismatches = check_against_onnx(parse_inspector_json(EXPLICIT_10X_WEAK), explicit_typing)
    node = [m for m in mismatches if m.kind == "node"]
    assert [(m.subject, m.expected, m.realized, m.layer) for m in node] == [
        ("/linear1/MatMul, /linear1/Add, /Cast", "fp16", "fp32", "__myl_MulSumAddCas_myl0_0")
    ]
    (engine,) = [m for m in mismatches if m.kind == "engine"]
    assert "no fp16/bf16 compute layer" in engine.realized
    # linear2's fp16 bias is an ONNX initializer seen as a layer input: its type is checked by name
    (bias,) = [m for m in mismatches if m.kind == "tensor"]
    assert (bias.subject, bias.expected, bias.realized) == ("linear2.bias", "fp16", "fp32")
    assert "ONNX declares fp16, the engine has fp32" in str(bias)


def test_10x_conv_net_with_reformat_and_cast_layers() -> None:
    report = parse_inspector_json(MNIST_10X_FP16)
    assert [layer.kind for layer in report.layers] == ["reformat", "compute", "compute", "cast"]
    conv = report.layers[1]
    assert conv.onnx_nodes == ("Convolution28", "Plus30", "ReLU32")
    assert conv.precision == "fp16" and conv.tactic.startswith("sm90_xmma_fprop")
    assert report.layers[0].onnx_nodes == ()
    assert report.histogram() == {"fp16": 2}
    assert [layer.name for layer in report.conversion_layers()] == [report.layers[0].name, "Plus214_Output_0_cast"]
    assert [(io.name, io.mode) for io in report.io_tensors] == [("Input3", "input"), ("Plus214_Output_0", "output")]


def test_layer_names_only_dump_maps_names_but_cannot_be_checked(explicit_typing: onnx.ModelProto) -> None:
    report = parse_inspector_json(NAMES_ONLY_10X)
    assert (report.schema, report.detailed) == ("10.x", False)
    assert [layer.kind for layer in report.layers] == ["reformat", "compute", "compute", "compute"]
    assert report.layers[1].onnx_nodes == ("Convolution28", "Plus30", "ReLU32")
    assert report.layers[2].node_range == ("/linear1/MatMul", "/Cast")
    assert report.layers[3].onnx_nodes == ()
    assert all(layer.precision is None for layer in report.layers)
    with pytest.raises(RunnerError, match="DETAILED"):
        check_against_onnx(report, explicit_typing)


# ---------------------------------------------------------------- 11.x


def test_11x_dump_with_io_tensors_and_split_datatype(explicit_typing: onnx.ModelProto) -> None:
    report = parse_inspector_json(EXPLICIT_11X_STRONG)
    assert (report.schema, report.detailed) == ("11.x", True)
    assert [(io.name, io.mode, io.precision, io.dims) for io in report.io_tensors] == [
        ("x", "input", "fp32", (1, 10)),
        ("y", "output", "fp32", (1, 40)),
    ]
    assert [layer.precision for layer in report.layers] == ["fp16", "fp32", "fp32"]
    assert report.layers[2].onnx_nodes == ("/linear3/MatMul", "/linear3/Add")  # from Name: no Metadata
    assert report.layers[0].inputs[0].text == "Float | Row major linear FP32 format (kLINEAR)"
    assert check_against_onnx(report, explicit_typing) == []


def test_11x_keys_are_case_insensitive() -> None:
    shouty = (
        EXPLICIT_11X_STRONG.replace('"Datatype"', '"DATATYPE"')
        .replace('"IOMode"', '"ioMode"')
        .replace('"Layers"', '"layers"')
        .replace('"I/O Tensors"', '"I/O tensors"')
    )
    assert parse_inspector_json(shouty) == parse_inspector_json(EXPLICIT_11X_STRONG)


def test_11x_split_keys_without_io_tensors_are_detected_as_11x() -> None:
    data = json.loads(EXPLICIT_11X_STRONG)
    del data["I/O Tensors"]
    assert parse_inspector_json(data).schema == "11.x"


def test_foreign_node_range_is_expanded_for_the_check(explicit_typing: onnx.ModelProto) -> None:
    """Layer 0 is named {ForeignNode[/linear1/MatMul.../Cast]} with no metadata: the range gives its nodes."""
    data = json.loads(EXPLICIT_11X_STRONG)
    data["Layers"][0]["Outputs"][0]["Datatype"] = "Float"
    data["Layers"][1]["Inputs"][0]["Datatype"] = "Float"
    node, engine = check_against_onnx(parse_inspector_json(data), explicit_typing)
    assert (node.kind, node.subject, node.expected, node.realized) == (
        "node",
        "/linear1/MatMul, /linear1/Add, /Cast",
        "fp16",
        "fp32",
    )
    assert engine.kind == "engine"  # and no layer is fp16 any more


def test_io_and_named_tensor_mismatches(explicit_typing: onnx.ModelProto) -> None:
    data = json.loads(EXPLICIT_11X_STRONG)
    data["I/O Tensors"][1]["DataType"] = "Half"
    data["Layers"][1]["Outputs"][0]["Datatype"] = "Half"  # /Cast_1_output_0 is declared fp32
    mismatches = check_against_onnx(parse_inspector_json(data), explicit_typing)
    assert [(m.kind, m.subject, m.expected, m.realized, m.layer) for m in mismatches] == [
        ("io", "y", "fp32", "fp16", ""),
        ("tensor", "/Cast_1_output_0", "fp32", "fp16", "__myl_ResMulSumAddCas_myl0_1"),
    ]
    assert isinstance(mismatches[0], Mismatch)


# ---------------------------------------------------------------- mapping and declared types


@pytest.mark.parametrize(
    ("name", "metadata", "expected"),
    [
        ("conv + bn + relu", "", ("conv", "bn", "relu")),
        ("anything", "[ONNX Layer: conv]\x1e[ONNX Layer: bn]\x1e[ONNX Layer: relu]", ("conv", "bn", "relu")),
        ("PWN(Add, Sub)", "[ONNX Layer: Add]\x1e[ONNX Layer: Sub]", ("Add", "Sub")),
        ("node with + in [brackets]", "[ONNX Layer: a + b]", ("a + b",)),
        ("Reformatting CopyNode for Input Tensor 0 to conv", "", ()),
        ("__myl_Mul_myl0_0", "", ()),
    ],
)
def test_onnx_nodes_of(name: str, metadata: str, expected: tuple[str, ...]) -> None:
    assert onnx_nodes_of(name, metadata) == expected


def test_declared_precisions_follow_the_onnx_types(explicit_typing: onnx.ModelProto) -> None:
    declared = declared_precisions(explicit_typing)
    assert declared["x"] == declared["y"] == declared["/linear1/Add_output_0"] == "fp32"
    assert declared["/Cast_output_0"] == declared["/linear2/Add_output_0"] == declared["linear2.weight"] == "fp16"


def test_report_to_dict_is_json() -> None:
    out = json.loads(json.dumps(parse_inspector_json(MNIST_10X_FP16).to_dict()))
    assert out["schema"] == "10.x" and out["histogram"] == {"fp16": 2}
    assert out["layers"][1]["onnx_nodes"] == ["Convolution28", "Plus30", "ReLU32"]


# ---------------------------------------------------------------- malformed dumps


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ('{"Bindings": []}', "no 'Layers' list"),
        ('["a", "b"]', "no 'Layers' list"),
        ('{"Layers": [42]}', "layer 0: expected a layer object or name, got int"),
        ('{"Layers": [{"Name": "l", "Outputs": ["t"]}]}', "expected a tensor object, got str"),
        ('{"Layers": [], "I/O Tensors": ["x"]}', "'I/O Tensors': expected objects"),
    ],
)
def test_malformed_dumps_raise_runner_error(text: str, message: str) -> None:
    with pytest.raises(RunnerError, match=message):
        parse_inspector_json(text)


def test_load_inspector_json_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "layers.json"
    good.write_text(MNIST_10X_FP16)
    assert load_inspector_json(good).histogram() == {"fp16": 2}
    bad = tmp_path / "truncated.json"
    bad.write_text(MNIST_10X_FP16[:200])
    with pytest.raises(InputDataError) as info:
        load_inspector_json(bad)
    assert str(bad) in str(info.value) and "exportLayerInfo" in str(info.value)
    with pytest.raises(InputDataError, match="missing.json"):
        load_inspector_json(tmp_path / "missing.json")
