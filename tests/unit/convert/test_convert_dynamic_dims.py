"""Issue 19.2: the converter sizes dynamic dims nobody gave (batch 1, others 128) with one warning; tune and the
harness keep refusing. Models built in code; the reference run is real (onnxruntime in a child process)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from harness.cli import main as castguard
from harness.convert import ConvertOptions, ReferenceData, convert_path, convert_to_mixed_precision
from harness.convert.calibration import random_feeds
from harness.convert.cli import main as convert_main
from harness.data.feeds import input_specs
from harness.data.recipes import InputRecipe, make_feeds
from harness.data.shapes import UnsizedDims, resolve_shapes
from harness.data.sizing import MAX_DEFAULT_ELEMENTS
from tests.helpers.convert_builders import F32, elem_types, init, model, node, vi

I64 = TensorProto.INT64
VOCAB = 1000


def summed_tokens() -> onnx.ModelProto:
    """ids[batch, seq] -> Gather(table of 8.0, VOCAB rows) -> ReduceSum over seq -> y[batch, 16]: |y| = 8 * seq,
    beyond data_max 512 from seq 65 on (a reduction a sequence of 1 hides)."""
    table = np.full((VOCAB, 16), 8.0, np.float32)
    return model(
        [
            node("Gather", ["table", "ids"], ["emb"], "embed"),
            node("ReduceSum", ["emb", "axes"], ["y"], "sum", keepdims=0),
        ],
        [vi("ids", I64, ["batch", "seq"])],
        [vi("y", F32, ["batch", 16])],
        [init("table", table), init("axes", np.array([1], np.int64))],
        opset=18,
    )


def _save(built: onnx.ModelProto, folder: Path, name: str) -> Path:
    path = folder / name
    onnx.save(built, path)
    return path


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "harness.convert"]


def test_the_default_sequence_shows_the_sum_that_a_sequence_of_one_hides(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _save(summed_tokens(), tmp_path, "tokens.onnx")
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        default = convert_path(path, options=ConvertOptions(), reference=ReferenceData())
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    assert "ids dim 0 ('batch') = 1, dim 1 ('seq') = 128" in warnings[0]
    assert "--input_shapes ids:1x128" in warnings[0] and "calibration" in warnings[0]
    assert dict(default.high_nodes)["sum"].startswith("data_max: output 'y' absmax 1024")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        one = convert_path(path, options=ConvertOptions(), reference=ReferenceData(input_shapes={"ids": (1, 1)}))
    assert _warnings(caplog) == [] and "sum" in one.low_nodes  # |y| = 8: AutoCast's sizes see nothing
    api = convert_to_mixed_precision(onnx_path=str(path))
    sums = [n for n in api.graph.node if n.op_type == "ReduceSum"]
    assert [n.name for n in sums] == ["sum"] and elem_types(api)[sums[0].output[0]] == F32  # the API does too


def test_token_ids_are_valid_rows_of_the_table_they_index() -> None:
    feed = random_feeds(summed_tokens(), seed=0, input_shapes=None, dynamic_default=128)[0][0]
    assert feed["ids"].shape == (1, 128) and feed["ids"].min() >= 0 and feed["ids"].max() < VOCAB
    assert feed["ids"].max() > VOCAB // 2  # spread over the table, not {0, 1}


def test_the_command_line_converts_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _save(summed_tokens(), tmp_path, "my tokens.onnx")
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        converted = convert_main([f"--onnx_path={path}"])
    assert len(_warnings(caplog)) == 1 and (tmp_path / "my tokens.fp16.onnx").is_file()
    onnx.checker.check_model(converted, full_check=True)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        convert_main(["--onnx_path", str(path), "--input_shapes", "ids:2x4", "--output_path", str(tmp_path / "o.onnx")])
    assert _warnings(caplog) == []


def linked() -> onnx.ModelProto:
    """A KV-cache-like graph: past[batch, past_seq, 4] and the new tokens' x[batch, seq, 4] are concatenated and
    multiplied by mask[batch, 'past_seq + seq'] (as exporters name it): the run fails unless the sizes agree."""
    return model(
        [
            node("Concat", ["past", "x"], ["all"], "concat", axis=1),
            node("Unsqueeze", ["mask", "axes"], ["mask3"], "unsqueeze"),
            node("Mul", ["all", "mask3"], ["y"], "mul"),
        ],
        [
            vi("past", F32, ["batch", "past_seq", 4]),
            vi("x", F32, ["batch", "seq", 4]),
            vi("mask", F32, ["batch", "past_seq + seq"]),
        ],
        [vi("y", F32, ["batch", "total", 4])],
        [init("axes", np.array([2], np.int64))],
        opset=18,
    )


def test_linked_dims_agree_by_name_and_by_expression(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plan = resolve_shapes(input_specs(linked()), (), where="m", dynamic_default=128)
    assert plan.shapes == {"past": (1, 128, 4), "x": (1, 128, 4), "mask": (1, 256)}
    assert "mask dim 1 ('past_seq + seq') = 256, computed from past_seq = 128, seq = 128" in plan.notes
    given = resolve_shapes(input_specs(linked()), (("x", (2, 5, 4)),), where="m", dynamic_default=128)
    assert given.shapes == {"past": (2, 128, 4), "x": (2, 5, 4), "mask": (2, 133)}
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        result = convert_path(_save(linked(), tmp_path, "kv.onnx"), options=ConvertOptions(), reference=ReferenceData())
    assert len(_warnings(caplog)) == 1 and "dim 1 ('past_seq + seq') = 256" in _warnings(caplog)[0]
    assert result.low_nodes == ("concat", "unsqueeze", "mul")  # the run succeeded at once: one warning


def test_sizes_that_must_agree_without_a_name_fall_back_to_one_and_say_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """x['n'] + a 3-vector broadcasts only for n in {1, 3}: 128 fails, then AutoCast's 1 runs."""
    built = model(
        [node("Add", ["x", "c"], ["y"], "add")],
        [vi("x", F32, ["n"])],
        [vi("y", F32, [3])],
        [init("c", np.ones(3, np.float32))],
        opset=18,
    )
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        result = convert_path(_save(built, tmp_path, "bcast.onnx"), options=ConvertOptions(), reference=ReferenceData())
    warnings = _warnings(caplog)
    assert len(warnings) == 2 and "x dim 0 ('n') = 128" in warnings[0]
    assert "running it again with every unsized dim at 1, as AutoCast does" in warnings[1]
    assert result.low_nodes == ("add",)
    assert any("x float32[1]" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)


def test_defaults_shrink_for_large_inputs_and_given_sizes_never_do() -> None:
    volume = model(
        [node("Relu", ["v"], ["y"], "relu")],
        [vi("v", F32, [1, "c", "d", "h", "w"])],
        [vi("y", F32, [1, "c", "d", "h", "w"])],
    )
    plan = resolve_shapes(input_specs(volume), (), where="m", dynamic_default=128)
    assert plan.shapes["v"] == (1, 32, 32, 32, 32) and 32**4 <= MAX_DEFAULT_ELEMENTS
    given = resolve_shapes(input_specs(volume), (("v", (1, 64, 64, 64, 64)),), where="m", dynamic_default=128)
    assert given.shapes["v"] == (1, 64, 64, 64, 64) and given.defaulted == ()


def test_the_harness_and_tune_keep_refusing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UnsizedDims, match="input 'ids' dim 1 \\('seq'\\)"):
        make_feeds(summed_tokens(), InputRecipe(), where="tokens.onnx")  # the pytest plugin's inputs
    monkeypatch.chdir(tmp_path)
    path = _save(summed_tokens(), tmp_path, "tokens.onnx")
    code = castguard(
        ["tune", "--onnx_path", str(path), "--output_path", str(tmp_path / "t.onnx"), "--quiet", "--no_cache"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "input 'ids' dim 1 ('seq')" in err and "tune does not guess them" in err
    assert "error bound it checks is a claim" in err and "--input_shapes ids:1x128" in err
