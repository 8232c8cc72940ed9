"""The converter on the ONNX backend node tests (issues 10 and 19): no crash and no invalid model, in both modes.

Two sets: the single-op models of ``onnx.backend.test.case.node``, built from the installed onnx package, and
the stored models the onnx wheels up to 1.20 ship under ``backend/test/data/node`` (a sample is kept in
``tests/data/onnx_node_data``; the two differ: opsets, IR versions, attributes left to their defaults). All of
them in both modes take ~15 minutes on 2 cores (``python benchmarks/node_tests.py [--data-dir DIR]`` prints
the counts), so CI converts a fixed sample of each: the first regenerated test (by name) of every op type,
alternating fp16 defaults and bf16 + keep_io_types, plus the tests that found each fixed bug, in both modes;
and every stored model of the kept sample, modes alternating, the fixed ones in both.

Valid means what :func:`tests.helpers.node_validity.validity_problem` checks.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from onnx.backend.test.case import node as node_cases

from harness.convert import convert_to_mixed_precision
from harness.convert.referror import ReferenceRunError
from harness.core.errors import ConversionError
from tests.helpers.node_validity import validity_problem

MODES: dict[str, dict[str, object]] = {"fp16": {}, "bf16-keepio": {"low_precision_type": "bf16", "keep_io_types": True}}
REGRESSIONS = (
    "test_layer_normalization_2d_axis0",  # a later output (Mean) is a graph output
    "test_split_equal_parts_1d_opset18",  # Split: every part a graph output
    "test_lstm_with_initial_bias",  # Y_h / Y_c
    "test_batchnorm_epsilon_training_mode",  # running mean/var outputs
    "test_attention_3d_with_past_and_present",  # present_key / present_value
    "test_scan9_sum",  # Scan outputs
    "test_rms_normalization_2d_axis0",  # bf16: Y tied to X by onnx's inference
    "test_mvn",  # onnx's function body fails strict inference at opset 13
    "test_scan_sum",  # opset 8: the version converter would change the inputs
    "test_bitcast_float32_to_int32",  # bit width must match
    "test_split_to_sequence_1",  # sequence output typed by its input
    "test_reduce_sum_empty_axes_input_noop",  # zero-size axes input
    "test_onehot_with_axis",  # ORT loads it but random data cannot run it
    "test_cast_FLOAT8E4M3FN_to_FLOAT",  # float8 input: no random data
    "test_optional_get_element_sequence",  # non-tensor input
    "test_regex_full_match_basic",  # string input
    "test_ai_onnx_ml_label_encoder_string_int",  # no default-domain opset
)


SAMPLE_FILE = Path(__file__).resolve().parents[2] / "data" / "onnx_node_sample.json"
"""The sample's (test name, mode) pairs, committed so that collection does not build every node test (13 s at
import); ``test_the_committed_sample_is_current`` recomputes it from the installed onnx."""


@functools.lru_cache(maxsize=1)
def _cases() -> dict[str, onnx.ModelProto]:
    """Every regenerated node test of the installed onnx, built once per process, when a test first needs it."""
    with warnings.catch_warnings():  # the cases' own numpy reference code warns (overflow, divide by zero)
        warnings.simplefilter("ignore", RuntimeWarning)
        collected = node_cases.collect_testcases(None)
    return {c.name: c.model for c in collected if "_expanded" not in c.name and c.model is not None}


def _sample(cases: dict[str, onnx.ModelProto]) -> Iterator[tuple[str, str]]:
    """(test name, mode): the first test of every op type not yet covered, modes alternating; regressions
    in both modes."""
    covered: set[str] = set()
    by_op: dict[str, str] = {}
    for name in sorted(cases):
        for op in sorted({n.op_type for n in cases[name].graph.node}):
            by_op.setdefault(op, name)
    index = 0
    for op in sorted(by_op):
        if op in covered:
            continue
        name = by_op[op]
        covered |= {n.op_type for n in cases[name].graph.node}
        yield name, list(MODES)[index % 2]
        index += 1
    for name in REGRESSIONS:
        yield from ((name, mode) for mode in MODES)


SAMPLE: list[tuple[str, str]] = [(name, mode) for name, mode in json.loads(SAMPLE_FILE.read_text())]


def test_the_committed_sample_is_current() -> None:
    """The committed sample covers every op type of the installed onnx's node tests, and the regressions."""
    cases = _cases()
    ops = {n.op_type for model in cases.values() for n in model.graph.node}
    sampled = {n.op_type for name, _ in SAMPLE if name in cases for n in cases[name].graph.node}
    assert len(ops) > 150 and all(name in cases for name in REGRESSIONS)
    missing = ops - sampled
    assert not missing, (
        f"onnx {onnx.__version__} has node tests of op types the committed sample lacks: "
        f"{sorted(missing)}; regenerate it from the repository root: python -m tests.unit.convert.test_onnx_node_tests --write-sample"
    )


STORED = Path(__file__).resolve().parents[2] / "data" / "onnx_node_data"
STORED_SAMPLE = sorted(
    {
        *((path.parent.name, list(MODES)[index % 2]) for index, path in enumerate(sorted(STORED.glob("*/model.onnx")))),
        *((name, mode) for name in ("test_mvn", "test_scan_sum", "test_scan9_sum") for mode in MODES),
    }
)


def _convert_and_check(source: onnx.ModelProto, mode: str, tmp_path: Path) -> None:
    """Valid output, or a clean refusal where onnxruntime cannot load the op at all (the message names it)."""
    path = tmp_path / "model.onnx"
    onnx.save(source, path)
    logging.getLogger("harness.convert").setLevel(logging.ERROR)
    try:
        converted = convert_to_mixed_precision(str(path), **MODES[mode])  # type: ignore[arg-type]
    except ReferenceRunError as err:
        assert err.stage == "load", f"onnxruntime runs this op; the converter must not refuse it: {err}"
        ops = {n.op_type for n in source.graph.node}
        assert any(op in str(err) for op in ops), f"the refusal must name the op: {err}"
        return
    except ConversionError as err:
        assert not (err.step or "").startswith("validate"), f"invalid output (a converter bug): {err}"
        raise
    problem = validity_problem(source, converted, low=str(MODES[mode].get("low_precision_type", "fp16")))
    assert problem is None, f"invalid conversion (a converter bug): {problem}"


@pytest.mark.parametrize(("name", "mode"), SAMPLE)
def test_node_test_converts_or_is_refused_cleanly(name: str, mode: str, tmp_path: Path) -> None:
    cases = _cases()
    if name not in cases:
        pytest.skip(f"onnx {onnx.__version__} has no node test {name!r} (the committed sample names it)")
    _convert_and_check(cases[name], mode, tmp_path)


def test_the_stored_sample_holds_the_regressions() -> None:
    names = {name for name, _ in STORED_SAMPLE}
    assert {"test_mvn", "test_scan_sum", "test_scan9_sum"} <= names and len(names) > 150


@pytest.mark.parametrize(("name", "mode"), STORED_SAMPLE)
def test_stored_node_test_converts_or_is_refused_cleanly(name: str, mode: str, tmp_path: Path) -> None:
    _convert_and_check(onnx.load(STORED / name / "model.onnx"), mode, tmp_path)


if __name__ == "__main__" and sys.argv[1:] == ["--write-sample"]:  # regenerate the committed sample
    SAMPLE_FILE.write_text(json.dumps(sorted(set(_sample(_cases()))), indent=0) + "\n")
