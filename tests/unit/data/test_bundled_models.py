"""The bundled models: registry, validity, behaviour, and byte-stable rebuilds."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

import test_models
from harness.data.roles import input_roles
from test_models.artifacts import onnx_bytes, read_pgm
from test_models.small_models import BUILDERS, FP16_MAX

MNIST = test_models.MODELS["mnist"]


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _default_feed(sess: ort.InferenceSession, model_name: str) -> dict[str, np.ndarray]:
    """The model's committed inputs (first sample), else random floats with every dynamic dim (batch) at 1."""
    inputs = test_models.default_inputs(model_name)
    if inputs is not None:
        with np.load(inputs, allow_pickle=False) as data:
            return {
                i.name: data[i.name][: i.shape[0]] if isinstance(i.shape[0], int) else data[i.name]
                for i in sess.get_inputs()
            }
    rng = np.random.default_rng(0)
    ranges = test_models.default_val_ranges(model_name)
    return {
        i.name: rng.uniform(
            *ranges.get(i.name, (-1.0, 1.0)), size=[d if isinstance(d, int) else 1 for d in i.shape]
        ).astype(np.float32)
        for i in sess.get_inputs()
    }


# ---------------------------------------------------------------- registry


def test_registry_lists_every_model_folder() -> None:
    folders = {p.parent.name for p in test_models.bundled_dir().glob("*/*.onnx")}
    assert test_models.names() == sorted(folders)
    assert {"mnist", "needs_constraints", "explicit_typing"} <= set(test_models.names())


@pytest.mark.parametrize("name", test_models.names())
def test_every_registered_artifact_is_committed(name: str) -> None:
    missing = [p for p in test_models.MODELS[name].artifacts() if not p.is_file()]
    assert missing == []


@pytest.mark.parametrize("ref", ["mnist", "mnist.onnx"])
def test_default_inputs_accepts_name_or_file_name(ref: str) -> None:
    assert test_models.default_inputs(ref) == MNIST.folder / "digits.npz"


def test_default_inputs_and_ranges_for_other_models() -> None:
    assert test_models.default_inputs("needs_constraints") is None
    assert test_models.default_val_ranges("needs_constraints.onnx") == {"x": (1.0, 2.0)}
    assert test_models.default_val_ranges("mnist") == {}
    assert test_models.default_inputs("not_bundled") is None
    assert test_models.default_val_ranges("not_bundled") == {}


# ---------------------------------------------------------------- every model


@pytest.mark.parametrize("name", test_models.names())
def test_model_passes_full_checker(name: str) -> None:
    onnx.checker.check_model(str(test_models.MODELS[name].path), full_check=True)


@pytest.mark.parametrize("name", test_models.names())
def test_model_runs_in_onnxruntime(name: str) -> None:
    sess = _session(test_models.MODELS[name].path)
    outputs = sess.run(None, _default_feed(sess, name))
    declared = onnx.load(str(test_models.MODELS[name].path)).graph.output
    for out, value in zip(declared, outputs):  # a dynamic dim (dim_param) matches any size
        dims = [d.dim_value if d.HasField("dim_value") else None for d in out.type.tensor_type.shape.dim]
        assert len(value.shape) == len(dims) and all(d in (None, n) for d, n in zip(dims, value.shape)), out.name
    assert all(np.isfinite(o).all() for o in outputs)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_code_built_model_rebuilds_byte_identical(name: str) -> None:
    assert onnx_bytes(BUILDERS[name]()) == test_models.MODELS[name].path.read_bytes()


# ---------------------------------------------------------------- mnist


def test_mnist_has_the_onnx_zoo_interface() -> None:
    model = onnx.load(str(MNIST.path))
    assert [n.name for n in model.graph.node] == [
        "Convolution28",
        "Plus30",
        "ReLU32",
        "Pooling66",
        "Convolution110",
        "Plus112",
        "ReLU114",
        "Pooling160",
        "Times212_reshape0",
        "Times212",
        "Plus214",
    ]
    (inp,), (out,) = model.graph.input, model.graph.output
    assert (inp.name, [d.dim_value for d in inp.type.tensor_type.shape.dim]) == ("Input3", [1, 1, 28, 28])
    assert (out.name, [d.dim_value for d in out.type.tensor_type.shape.dim]) == ("Plus214_Output_0", [1, 10])
    assert inp.type.tensor_type.elem_type == out.type.tensor_type.elem_type == TensorProto.FLOAT


@pytest.mark.parametrize("digit", range(10))
def test_mnist_classifies_its_pgm_digit(digit: int) -> None:
    """The TensorRT sample's flow: PIL reads the inverted pgm, ``1 - x/255`` is the input, argmax is the digit."""
    img = read_pgm(MNIST.folder / f"{digit}.pgm")
    assert img.shape == (28, 28) and img.dtype == np.uint8
    assert img[0, 0] == 255  # inverted like the sample data: white background, dark digit
    feed = (1.0 - img / 255.0).reshape(1, 1, 28, 28).astype(np.float32)
    (logits,) = _session(MNIST.path).run(["Plus214_Output_0"], {"Input3": feed})
    assert int(np.argmax(logits)) == digit


def test_mnist_pgm_files_are_binary_p5() -> None:
    for digit in range(10):
        assert (MNIST.folder / f"{digit}.pgm").read_bytes().startswith(b"P5\n28 28\n255\n")


def test_digits_npz_is_the_preprocessed_pgms_in_digit_order() -> None:
    pgms = np.stack([read_pgm(MNIST.folder / f"{d}.pgm") for d in range(10)])
    expected = (1.0 - pgms / 255.0).reshape(10, 1, 28, 28).astype(np.float32)
    with np.load(MNIST.folder / "digits.npz", allow_pickle=False) as digits:
        assert list(digits.keys()) == ["Input3"]
        assert digits["Input3"].dtype == np.float32
        np.testing.assert_array_equal(digits["Input3"], expected)
    with np.load(MNIST.folder / "8.npz", allow_pickle=False) as eight:
        assert list(eight.keys()) == ["Input3"]
        np.testing.assert_array_equal(eight["Input3"], expected[8:9])


def test_mnist_activation_ranges_straddle_the_sample_data_max() -> None:
    """Conv block 1 stays below the TensorRT sample's data_max=4 (AutoCast makes it fp16), block 2 exceeds it
    (kept fp32), and the logits are well above 1, so fp16 rounding is visible (ulp >= 2^-6 there)."""
    model = onnx.load(str(MNIST.path))
    probes = ["Plus30_Output_0", "Plus112_Output_0"]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in probes)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with np.load(MNIST.folder / "digits.npz", allow_pickle=False) as digits:
        runs = [sess.run(None, {"Input3": x[None]}) for x in digits["Input3"]]
    logits, block1, block2 = (max(float(np.abs(r[i]).max()) for r in runs) for i in range(3))
    assert 1.0 < block1 < 4.0 < block2 < 64.0
    assert 10.0 < logits < 100.0


@pytest.mark.slow
def test_mnist_retrains_byte_identical() -> None:
    """Retraining (about 10 s on 2 cores) reproduces the committed mnist files exactly (CI: leg 50-mnist-rebuild)."""
    from test_models.build import why_mnist_cannot_reproduce

    reason = why_mnist_cannot_reproduce()
    if reason is not None:
        pytest.skip(reason)
    proc = subprocess.run(
        [sys.executable, "-m", "test_models.build", "--check", "mnist"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "up to date" in proc.stdout


# ---------------------------------------------------------------- the small models


def test_needs_constraints_is_identity_in_fp32_and_names_add_and_sub() -> None:
    model = onnx.load(str(test_models.MODELS["needs_constraints"].path))
    assert [(n.name, n.op_type) for n in model.graph.node] == [
        ("MatMul_0", "MatMul"),
        ("Add", "Add"),
        ("Sub", "Sub"),
        ("MatMul_1", "MatMul"),
    ]
    x = np.random.default_rng(1).uniform(1.0, 2.0, size=(1, 8)).astype(np.float32)
    (y,) = _session(test_models.MODELS["needs_constraints"].path).run(None, {"x": x})
    # fp32 spacing at 65504 is 2^-8, so the round trip through FP16_MAX keeps x to within half of that
    np.testing.assert_allclose(y, x, rtol=0, atol=2.0**-9)
    # in fp16 the sum rounds back to FP16_MAX (spacing 32 there), so Sub returns 0 and x is lost
    lost = (x.astype(np.float16) + np.float16(FP16_MAX)) - np.float16(FP16_MAX)
    assert not lost.any()


def test_explicit_typing_declares_linear2_fp16_between_casts() -> None:
    model = onnx.shape_inference.infer_shapes(
        onnx.load(str(test_models.MODELS["explicit_typing"].path)), strict_mode=True
    )
    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
    inits = {t.name: t.data_type for t in model.graph.initializer}
    assert inits["linear2.weight"] == inits["linear2.bias"] == TensorProto.FLOAT16
    assert inits["linear1.weight"] == inits["linear3.weight"] == TensorProto.FLOAT
    assert (
        types["/Cast_output_0"]
        == types["/linear2/MatMul_output_0"]
        == types["/linear2/Add_output_0"]
        == TensorProto.FLOAT16
    )
    assert types["/linear1/Add_output_0"] == types["/Cast_1_output_0"] == TensorProto.FLOAT
    casts = [n for n in model.graph.node if n.op_type == "Cast"]
    assert [onnx.helper.get_attribute_value(c.attribute[0]) for c in casts] == [TensorProto.FLOAT16, TensorProto.FLOAT]


def test_transformer_block_has_the_usually_excluded_ops() -> None:
    ops = {n.op_type for n in onnx.load(str(test_models.MODELS["transformer_block"].path)).graph.node}
    assert {"LayerNormalization", "Softmax", "ReduceMean", "Pow", "Sqrt", "Div", "MatMul"} <= ops


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_branch_takes_the_branch_the_sum_selects(sign: float) -> None:
    x = (sign * np.array([[0.5, 1.0, 1.5, 2.0]])).astype(np.float32)
    (y,) = _session(test_models.MODELS["if_branch"].path).run(None, {"x": x})
    expected = 3.0 * x + 1.0 if sign > 0 else (x - 1.0) * 0.5
    np.testing.assert_allclose(y, expected, rtol=1e-6)


# ---------------------------------------------------------------- the real exports (make_real_exports.py)

REAL = [name for name in test_models.names() if test_models.MODELS[name].made_by == "test_models.make_real_exports"]


def _ops(name: str) -> Counter[str]:
    return Counter(n.op_type for n in onnx.load(str(test_models.MODELS[name].path)).graph.node)


def test_real_exports_are_small_opset_17_pytorch_exports_with_named_dynamic_dims() -> None:
    assert sorted(REAL) == ["bert_tiny", "gpt2_tiny", "llama_tiny", "timm_mobilenetv3"]
    for name in REAL:
        path = test_models.MODELS[name].path
        model = onnx.load(str(path))
        assert path.stat().st_size < 3_000_000 and model.producer_name == "pytorch"
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
        dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
        expected = (
            {"input": ["batch", 3, 224, 224]}
            if name == "timm_mobilenetv3"
            else {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "sequence"]}
        )
        assert dims == expected


def test_real_exports_have_the_ops_of_note() -> None:
    assert _ops("timm_mobilenetv3")["HardSwish"] == 19
    llama = onnx.load(str(test_models.MODELS["llama_tiny"].path))
    to_float = [n for n in llama.graph.node if n.op_type == "Cast" and n.attribute[0].i == TensorProto.FLOAT]
    assert sum("layernorm" in n.name or "/norm/" in n.name for n in to_float) == 10  # RMSNorm: 5 x 2
    assert sum("self_attn" in n.name for n in to_float) == 4  # softmax(dtype=float32)
    assert {"Softmax", "ReduceMean", "Sin", "Cos"} <= set(_ops("llama_tiny"))  # attention, RMSNorm, rotary
    assert _ops("bert_tiny")["Softmax"] == _ops("gpt2_tiny")["Softmax"] == 2


@pytest.mark.parametrize("name", [n for n in REAL if test_models.MODELS[n].inputs_file])
def test_real_export_inputs_are_valid_ids_and_a_padded_mask(name: str) -> None:
    inputs = test_models.default_inputs(name)
    assert inputs is not None
    with np.load(inputs, allow_pickle=False) as data:
        ids, mask = data["input_ids"], data["attention_mask"]
    vocab = input_roles(onnx.load(str(test_models.MODELS[name].path)))["input_ids"].rows  # what the harness draws
    assert ids.dtype == mask.dtype == np.int64 and ids.shape == mask.shape == (2, 64)
    assert 0 <= ids.min() and ids.max() < vocab == 512
    assert mask[0].all() and mask[1, :48].all() and not mask[1, 48:].any()


def test_build_script_rebuilds_only_its_own_models() -> None:
    assert set(test_models.built_names()) == set(test_models.names()) - set(REAL)
    proc = subprocess.run(
        [sys.executable, "-m", "test_models.build", "--check", "llama_tiny"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "python -m test_models.make_real_exports" in proc.stderr
