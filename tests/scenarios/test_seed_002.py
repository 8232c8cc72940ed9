"""Seed 002: explicit typing (Torch-TensorRT's MyModule) and fp32 accumulation.

The bundled explicit_typing model is linear1 fp32 -> Cast fp16 -> linear2 fp16 -> Cast fp32 -> linear3 fp32.
With ``respect_existing_types`` the converter keeps exactly those types; under TensorRT (when present) the
strongly typed engine's layer precisions must match them. ``fp32_accumulation`` wraps each fp16 MatMul/Gemm
as Cast -> fp32 MatMul -> Cast (what strongly typed TensorRT fuses into an fp16 GEMM with fp32 accumulation):
checked for structure, and for accuracy on ``emulate`` against the committed FP32 golden.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import test_models
from harness import (
    ConvertOptions,
    GoldenStore,
    TolerancePolicy,
    bundled_models_dir,
    cast_feeds,
    collect_magnitudes,
    convert_model,
    declared_precisions,
    input_specs,
    judge_outputs,
    make_runner,
    recipe_for_file,
    resolve_model,
)
from harness.core.errors import RunnerUnavailable
from harness.runners.tensorrt.library import installed_module
from harness.runners.tensorrt.typed_build import check_build

BUNDLED = Path(test_models.bundled_dir())
GOLDENS = Path(__file__).resolve().parents[2] / "goldens"


def _load(name: str) -> onnx.ModelProto:
    return onnx.load(BUNDLED / name / f"{name}.onnx")


def _producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {out: node for node in model.graph.node for out in node.output}


def _assert_wrapped(model: onnx.ModelProto, node_name: str) -> None:
    """``node_name`` computes in fp32 between Casts: fp16 -> fp32 inputs, fp32 -> fp16 output."""
    types = declared_precisions(model)
    producers = _producers(model)
    node = next(n for n in model.graph.node if n.name == node_name)
    assert types[node.output[0]] == "fp32"
    for name in node.input:
        cast = producers[name]
        assert cast.op_type == "Cast" and types[name] == "fp32" and types[cast.input[0]] == "fp16"
    consumers = [n for n in model.graph.node if node.output[0] in n.input]
    assert consumers and all(c.op_type == "Cast" and types[c.output[0]] == "fp16" for c in consumers)


def test_respect_existing_types_keeps_exactly_the_users_types() -> None:
    model = _load("explicit_typing")
    before = declared_precisions(model)
    assert before["/linear2/MatMul_output_0"] == "fp16" and before["y"] == "fp32"
    magnitudes = collect_magnitudes(model, seed=0)
    kept = convert_model(model, options=ConvertOptions(respect_existing_types=True), magnitudes=magnitudes)
    assert declared_precisions(kept.model) == before
    assert [(n.name, n.op_type) for n in kept.model.graph.node] == [(n.name, n.op_type) for n in model.graph.node]
    assert kept.cast_count == 0


@pytest.mark.skipif(
    installed_module() is None,
    reason='no TensorRT module is installed (neither tensorrt nor tensorrt_rtx_bindings): pip install "castguard[trt]"',
)
def test_the_tensorrt_layer_precisions_match_the_onnx_types() -> None:
    """The network TensorRT parses keeps the user's fp16 linear2 (built on any machine); the engine's realized
    per-layer precisions are checked too where a supported GPU can run it."""
    model = _load("explicit_typing")
    kept = convert_model(model, options=ConvertOptions(respect_existing_types=True), magnitudes=None).model
    build = check_build(kept, model_dir=BUNDLED / "explicit_typing")
    rows = {r.node: r for r in build.nodes}
    assert build.ok and rows["/linear2/MatMul"].tensorrt == "fp16" and rows["/linear3/MatMul"].tensorrt == "fp32"
    runner = make_runner("trt", kept, model_dir=BUNDLED / "explicit_typing")
    try:
        runner.run([{"x": np.random.default_rng(0).uniform(-1, 1, (1, 10)).astype(np.float32)}])
    except RunnerUnavailable as err:
        pytest.skip(f"the engine builds with the user's types; running it: {err}")
    assert runner.check_precisions() == []  # type: ignore[attr-defined]


def test_fp32_accumulation_wraps_the_users_fp16_linear2() -> None:
    model = _load("explicit_typing")
    wrapped = convert_model(
        model, options=ConvertOptions(respect_existing_types=True, fp32_accumulation=True), magnitudes=None
    ).model
    _assert_wrapped(wrapped, "/linear2/MatMul")
    assert declared_precisions(wrapped)["/linear2/Add_output_0"] == "fp16"


def test_fp32_accumulation_on_mnist_structure_and_accuracy_on_emulate() -> None:
    spec = resolve_model("mnist", search_dir=bundled_models_dir())
    golden = GoldenStore(GOLDENS).load(spec, recipe_for_file(BUNDLED / "mnist" / "digits.npz"))
    model = _load("mnist")
    magnitudes = collect_magnitudes(model, feeds=golden.feeds)
    results = {}
    for accumulate in (False, True):
        options = ConvertOptions(keep_io_types=True, fp32_accumulation=accumulate)
        converted = convert_model(model, options=options, magnitudes=magnitudes).model
        run = make_runner("emulate", converted).run(cast_feeds(golden.feeds, input_specs(converted)))
        assert judge_outputs(run.outputs, golden.outputs, precision="fp16", policy=TolerancePolicy())
        results[accumulate] = np.concatenate([o["Plus214_Output_0"] for o in run.outputs])
        if accumulate:
            _assert_wrapped(converted, "Times212")
    gold = np.concatenate([o["Plus214_Output_0"] for o in golden.outputs])
    assert list(np.argmax(results[True], axis=1)) == list(range(10))
    ulp = float(np.spacing(np.float16(np.abs(gold).max())))
    # emulate already accumulates MatMul in fp32 and rounds its output once, so the wrap changes at most an ulp
    assert np.abs(results[True] - gold).max() <= np.abs(results[False] - gold).max() + ulp
