"""AutoCast's public-API behaviour, reproduced against castguard through `tests.helpers.autocast_shim` (issue 10).

Each test mirrors one of AutoCast's own unit tests (tests/unit/onnx/autocast/test_autocast.py in NVIDIA
Model-Optimizer) or one gap found running them: written here from their behaviour, on models built in code.
The documented differences (a user's Cast to DOUBLE is kept; a crop Resize's ``roi`` stays FP32) are asserted
as castguard behaviour in test_convert_casts.py / test_convert_classify.py and listed in the README.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from tests.helpers.autocast_shim import convert_to_mixed_precision, get_opset_version, get_parser, main
from tests.helpers.convert_builders import F32, init, model, node, vi

F16 = TensorProto.FLOAT16


def simple(opset: int = 20) -> onnx.ModelProto:
    """AutoCast's `simple_model` fixture: Gemm -> Add -> Relu, X[1,5] -> Y[1,3], opset 20, IR 10."""
    rng = np.random.default_rng(0)
    return model(
        [
            node("Gemm", ["X", "gemm_weight", "gemm_bias"], ["gemm_out"], "gemm_node"),
            node("Add", ["gemm_out", "add_const"], ["add_out"], "add_node"),
            node("Relu", ["add_out"], ["Y"], "relu_node"),
        ],
        [vi("X", F32, [1, 5])],
        [vi("Y", F32, [1, 3])],
        [
            init("gemm_weight", rng.standard_normal((5, 3)).astype(np.float32)),
            init("gemm_bias", rng.standard_normal(3).astype(np.float32)),
            init("add_const", rng.standard_normal((1, 3)).astype(np.float32)),
        ],
        opset=opset,
        ir=10,
    )


@pytest.fixture
def model_path(tmp_path: Path) -> str:
    path = tmp_path / "model.onnx"
    onnx.save(simple(), path)
    return str(path)


def test_missing_model_is_a_file_not_found_error() -> None:
    with pytest.raises(FileNotFoundError, match="model file does not exist"):
        convert_to_mixed_precision(onnx_path="nonexistent.onnx")


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_convert_simple_model(model_path: str, tmp_path: Path, keep_io_types: bool) -> None:
    converted = convert_to_mixed_precision(onnx_path=model_path, keep_io_types=keep_io_types)
    assert isinstance(converted, onnx.ModelProto)
    onnx.save(converted, tmp_path / "out.onnx")
    loaded = onnx.load(tmp_path / "out.onnx")
    ops = [n.op_type for n in loaded.graph.node]
    assert ops == (["Cast", "Gemm", "Add", "Relu", "Cast"] if keep_io_types else ["Gemm", "Add", "Relu"])
    want = F32 if keep_io_types else F16
    assert loaded.graph.input[0].type.tensor_type.elem_type == want
    assert loaded.graph.output[0].type.tensor_type.elem_type == want
    onnx.checker.check_model(loaded)


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_every_intermediate_tensor_has_its_type_in_value_info(model_path: str, keep_io_types: bool) -> None:
    """graphsurgeon reads a tensor's dtype from value_info: every node output that is not a graph output has
    an entry, with the type strict inference gives it (inserted Casts included)."""
    converted = convert_to_mixed_precision(onnx_path=model_path, keep_io_types=keep_io_types)
    declared = {vi.name: vi.type.tensor_type.elem_type for vi in converted.graph.value_info}
    outputs = {o.name for o in converted.graph.output}
    produced = [n for node_ in converted.graph.node for n in node_.output if n not in outputs]
    assert sorted(declared) == sorted(produced) and produced
    inferred = onnx.shape_inference.infer_shapes(converted, strict_mode=True, check_type=True)
    truth = {vi.name: vi.type.tensor_type.elem_type for vi in inferred.graph.value_info}
    assert declared == {name: truth[name] for name in declared}
    assert all(v.type.tensor_type.HasField("shape") for v in converted.graph.value_info)


@pytest.mark.parametrize("target_opset", [13, 17, 19, 21])
def test_opset_parameter(model_path: str, target_opset: int) -> None:
    converted = convert_to_mixed_precision(onnx_path=model_path, low_precision_type="fp16", opset=target_opset)
    assert get_opset_version(converted) >= target_opset
    onnx.checker.check_model(converted)


@pytest.mark.parametrize(
    ("low", "opset", "words"),
    [
        ("fp16", 11, ["limited FP16 support", "Recommended minimum opset is 13"]),
        ("bf16", 13, ["limited BF16 support", "Recommended minimum opset is 22"]),
        ("fp16", 13, ["lower than the original model's opset"]),
    ],
)
def test_opset_warnings_in_autocast_words(
    model_path: str, caplog: pytest.LogCaptureFixture, low: str, opset: int, words: list[str]
) -> None:
    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        converted = convert_to_mixed_precision(onnx_path=model_path, low_precision_type=low, opset=opset)
    assert all(w in caplog.text for w in words), caplog.text
    assert isinstance(converted, onnx.ModelProto) and get_opset_version(converted) == 20  # never downgraded


def test_main_returns_the_model_and_saves_it(model_path: str, tmp_path: Path) -> None:
    out = tmp_path / "test_output.onnx"
    result = main(
        ["--onnx_path", model_path, "--output_path", str(out), "--opset", "21", "--low_precision_type", "fp16"]
    )
    assert isinstance(result, onnx.ModelProto) and get_opset_version(result) >= 21
    saved = onnx.load(out)
    onnx.checker.check_model(saved)
    assert saved.SerializeToString() == result.SerializeToString()


def test_parser_opset_argument() -> None:
    parser = get_parser()
    assert parser.parse_args(["--onnx_path", "test.onnx", "--opset", "19"]).opset == 19
    assert parser.parse_args(["--onnx_path", "test.onnx"]).opset is None


def test_none_thresholds_mean_no_limit(tmp_path: Path) -> None:
    """data_max=None / init_max=None: no limit (a 1e6 weight and 1e4 activations would otherwise keep nodes)."""
    big = model(
        [node("MatMul", ["x", "W"], ["m"], "mm"), node("Relu", ["m"], ["y"], "relu")],
        [vi("x", F32, [1, 4])],
        [vi("y", F32, [1, 4])],
        [init("W", np.full((4, 4), 1e3, np.float32))],
    )
    path = tmp_path / "big.onnx"
    onnx.save(big, path)
    limited = convert_to_mixed_precision(str(path), keep_io_types=True, init_max=500)
    assert {n.name for n in limited.graph.node if n.op_type == "MatMul"} == {"mm"}
    assert next(i for i in limited.graph.initializer if i.name == "W").data_type == F32
    unlimited = convert_to_mixed_precision(str(path), keep_io_types=True, data_max=None, init_max=None)
    assert next(i for i in unlimited.graph.initializer if i.name == "W").data_type == F16


def test_stale_declared_shape_on_input_is_reinferred(tmp_path: Path) -> None:
    """A model whose value_info declares a wrong shape (left over by an earlier edit) runs in onnxruntime and
    converts in AutoCast; castguard drops the stale entry instead of failing its strict final check."""
    stale = model(
        [node("Relu", ["x"], ["r"], "relu"), node("Neg", ["r"], ["y"], "neg")],
        [vi("x", F32, [2, 4])],
        [vi("y", F32, [2, 4])],
    )
    stale.graph.value_info.append(vi("r", F32, [3, 7]))
    path = tmp_path / "stale.onnx"
    onnx.save(stale, path)
    converted = convert_to_mixed_precision(str(path))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in converted.graph.value_info}
    assert shapes == {"r": [2, 4]}


def test_unmatched_exclusions_are_named_in_a_warning(model_path: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        convert_to_mixed_precision(
            model_path, nodes_to_exclude=["gemm", "nothing_here"], op_types_to_exclude=["Relu", "Conv"]
        )
    assert "'nothing_here' matches no node name" in caplog.text and "'Conv' matches no node" in caplog.text
    assert "'gemm'" not in caplog.text and "'Relu'" not in caplog.text


def test_info_log_is_a_summary_and_debug_lists_every_node(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """40 nodes kept FP32 by one rule: INFO prints one line for them (count + first names), DEBUG one each."""
    nodes = [
        node("Relu", ["x" if i == 0 else f"t{i}"], [f"t{i + 1}" if i < 39 else "y"], f"relu{i}") for i in range(40)
    ]
    path = tmp_path / "chain.onnx"
    onnx.save(model(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])]), path)
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        convert_to_mixed_precision(str(path), op_types_to_exclude=["Relu"])
    kept = [
        r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "op_types_to_exclude" in r.getMessage()
    ]
    assert kept == ["40 node(s) kept out of fp16: op_types_to_exclude (relu0, relu1, relu2, ...)"]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="harness.convert"):
        convert_to_mixed_precision(str(path), op_types_to_exclude=["Relu"])
    assert (
        sum(
            r.levelno == logging.DEBUG
            and "op_types_to_exclude: Relu" in r.getMessage()
            and not r.getMessage().startswith("FP32 island")
            for r in caplog.records
        )
        == 40
    )


def test_bf16_model_gets_a_note_when_ort_cpu_cannot_load_it(model_path: str, caplog: pytest.LogCaptureFixture) -> None:
    import onnxruntime as ort

    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        converted = convert_to_mixed_precision(model_path, low_precision_type="bf16", opset=22)
    notes = [r.getMessage() for r in caplog.records if "CPU provider cannot load" in r.getMessage()]
    assert len(notes) == 1 and "Gemm" in notes[0] and "TensorRT" in notes[0]
    with pytest.raises(Exception, match="(?i)NOT_IMPLEMENTED|Could not find an implementation"):
        ort.InferenceSession(converted.SerializeToString(), providers=["CPUExecutionProvider"])
