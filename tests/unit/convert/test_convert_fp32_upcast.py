"""The author's explicit FP32 upcast: ``MatMul -> Cast(to=FLOAT) -> Softmax -> MatMul``.

It is what a PyTorch export writes for ``softmax(x, dtype=torch.float32)`` (Hugging Face attention) or
``x.float()``: in an FP32 graph the Cast changes nothing, and it is the only trace of the author's intent. By
default its readers stay FP32 whatever their size (``respect_fp32_casts``); ``--ignore_fp32_casts`` /
``respect_fp32_casts=False`` trades that for fewer casts (the Cast becomes an Identity between low nodes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from harness.convert import convert_to_mixed_precision
from harness.convert.cli import main
from tests.helpers.convert_builders import F32, casts, init, model, node, node_types, vi


def attention_like(n: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    return model(
        [
            node("MatMul", ["x", "w1"], ["s"], "mm1"),
            node("Cast", ["s"], ["s32"], "upcast", to=TensorProto.FLOAT),
            node("Softmax", ["s32"], ["p"], "softmax", axis=-1),
            node("MatMul", ["p", "w2"], ["y"], "mm2"),
        ],
        [vi("x", F32, [2, n])],
        [vi("y", F32, [2, n])],
        [
            init("w1", (rng.standard_normal((n, n)) * 0.05).astype(np.float32)),
            init("w2", (rng.standard_normal((n, n)) * 0.05).astype(np.float32)),
        ],
    )


@pytest.mark.parametrize("n", [8, 256, 2048])
@pytest.mark.parametrize("low", ["fp16", "bf16"])
def test_an_identity_upcast_holds_its_reader_in_fp32_at_every_size(n: int, low: str) -> None:
    converted = convert_to_mixed_precision(attention_like(n), low_precision_type=low)
    by_name = {x.name: x for x in converted.graph.node}
    assert by_name["upcast"].op_type == "Cast", "the author's Cast is kept"
    assert node_types(converted)["softmax"] == TensorProto.FLOAT
    assert node_types(converted)["mm1"] != TensorProto.FLOAT, "the MatMul before it still goes low"


@pytest.mark.parametrize("n", [8, 256])
def test_ignoring_fp32_casts_gives_the_fewest_casts(n: int) -> None:
    kept = convert_to_mixed_precision(attention_like(n))
    ignored = convert_to_mixed_precision(attention_like(n), respect_fp32_casts=False)
    assert {x.name: x.op_type for x in ignored.graph.node}["upcast"] == "Identity"
    assert node_types(ignored)["softmax"] == TensorProto.FLOAT16
    assert len(casts(ignored)) < len(casts(kept))


def test_the_cli_flag_ignores_them(tmp_path: Path) -> None:
    source = tmp_path / "attn.onnx"
    onnx.save(attention_like(8), source)
    default = main(["--onnx_path", str(source), "--output_path", str(tmp_path / "a.onnx")])
    ignored = main(["--onnx_path", str(source), "--output_path", str(tmp_path / "b.onnx"), "--ignore_fp32_casts"])
    assert node_types(default)["softmax"] == TensorProto.FLOAT
    assert node_types(ignored)["softmax"] == TensorProto.FLOAT16
