"""The README's *Differences from AutoCast* are castguard's behaviour (issue 34 item 12): each listed difference is
checked on a model built here, and the README states the default the code has."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from harness.convert import convert_to_mixed_precision
from tests.helpers.convert_builders import F32, init, model, node, vi

README = Path(__file__).resolve().parents[3] / "README.md"
HIDDEN = 16


def hand_written_layernorm() -> onnx.ModelProto:
    """MatMul -> the LayerNorm pattern AutoCast's replace_layernorm_pattern fuses (with the Mul scale) -> MatMul."""
    rng = np.random.default_rng(0)
    chain = [
        node("MatMul", ["x", "w1"], ["h"], "mm1"),
        node("ReduceMean", ["h", "axes"], ["mean"], "rm1"),
        node("Sub", ["h", "mean"], ["centred"], "sub"),
        node("Pow", ["centred", "two"], ["sq"], "pow"),
        node("ReduceMean", ["sq", "axes"], ["var"], "rm2"),
        node("Add", ["var", "eps"], ["var_eps"], "add_eps"),
        node("Sqrt", ["var_eps"], ["std"], "sqrt"),
        node("Div", ["centred", "std"], ["normed"], "div"),
        node("Mul", ["normed", "scale"], ["scaled"], "mul_scale"),
        node("Add", ["scaled", "bias"], ["ln"], "add_bias"),
        node("MatMul", ["ln", "w2"], ["y"], "mm2"),
    ]
    inits = [
        init("w1", rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32)),
        init("w2", rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32)),
        init("axes", np.array([-1], dtype=np.int64)),
        init("two", np.array(2.0, dtype=np.float32)),
        init("eps", np.array(1e-5, dtype=np.float32)),
        init("scale", rng.standard_normal(HIDDEN).astype(np.float32)),
        init("bias", rng.standard_normal(HIDDEN).astype(np.float32)),
    ]
    return model(chain, [vi("x", F32, [2, HIDDEN])], [vi("y", F32, [2, HIDDEN])], inits, opset=18, ir=10)


def test_a_hand_written_layernorm_is_converted_as_written_not_fused(tmp_path: Path) -> None:
    fp32 = hand_written_layernorm()
    path = tmp_path / "ln.onnx"
    onnx.save(fp32, path)
    converted = convert_to_mixed_precision(onnx_path=str(path), keep_io_types=True)
    ops = [n.op_type for n in converted.graph.node]
    assert "LayerNormalization" not in ops
    original = {n.name for n in fp32.graph.node}
    assert original <= {n.name for n in converted.graph.node}  # every node of the pattern is still there, by name
    assert {o.domain: o.version for o in converted.opset_import}.get("", 0) == 18  # no relabel (AutoCast writes 17)
    types = {v.name: v.type.tensor_type.elem_type for v in converted.graph.value_info}
    assert types.get("h") == TensorProto.FLOAT16  # and it is converted, not skipped


def test_the_readme_states_the_island_default_the_api_has() -> None:
    default = inspect.signature(convert_to_mixed_precision).parameters["fp32_island_min_flops"].default
    text = README.read_text(encoding="utf-8")
    differences = text[text.index("Differences from AutoCast, by design:") :]
    assert f"`fp32_island_min_flops={default}` is on by default" in differences
    assert "No LayerNorm fusion" in differences and '"Converted L/T nodes" counts differently' in differences
