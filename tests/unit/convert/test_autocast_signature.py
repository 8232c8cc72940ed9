"""castguard's AutoCast drop-in has AutoCast 0.47's signature and defaults, verbatim, and takes its numpy values.

``tests/data/autocast_0_47_api.json`` was read from the ``nvidia-modelopt==0.47.0`` wheel (its source names the
files); AutoCast's own defaults are numpy scalars (``init_max=np.finfo(np.float16).max``), so code written against
AutoCast passes numpy values: castguard must take every real number type, numpy bools, ints and strings.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from harness.convert.options import ConvertOptions
from tests.helpers.autocast_shim import convert_to_mixed_precision, get_parser, main
from tests.helpers.convert_builders import F32, init, model, node, vi

AUTOCAST = json.loads((Path(__file__).resolve().parents[2] / "data" / "autocast_0_47_api.json").read_text())
CONSTANTS = {"DEFAULT_DATA_MAX": 512, "DEFAULT_INIT_MAX": np.finfo(np.float16).max}


def _default(text: str | None) -> object:
    return None if text is None else CONSTANTS[text] if text in CONSTANTS else eval(text, {})  # noqa: S307


def test_positional_parameters_are_autocast_s_names_order_and_defaults() -> None:
    params = list(inspect.signature(convert_to_mixed_precision).parameters.values())
    positional = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == [p["name"] for p in AUTOCAST["convert_to_mixed_precision"]]
    for ours, theirs in zip(positional, AUTOCAST["convert_to_mixed_precision"]):
        if theirs["required"]:
            assert ours.default is inspect.Parameter.empty, ours.name
            continue
        expected = _default(theirs["default"])
        assert ours.default == expected and type(ours.default) is type(expected), (ours.name, ours.default)
    extras = [p for p in params if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in extras), "castguard's own options are keyword-only"


def test_init_max_default_is_autocast_s_numpy_scalar() -> None:
    default = inspect.signature(convert_to_mixed_precision).parameters["init_max"].default
    assert isinstance(default, np.float16) and float(default) == 65504.0


def test_every_autocast_flag_is_accepted_with_its_default() -> None:
    actions = {flag: action for action in get_parser()._actions for flag in action.option_strings}
    for spec in AUTOCAST["cli"]:
        for flag in spec["flags"]:
            assert flag in actions, f"castguard convert lacks AutoCast's {flag}"
        action = actions[spec["flags"][0]]
        if "default" in spec:
            expected = _default(spec["default"])
            assert action.default == expected, (spec["flags"], action.default, expected)
        if "nargs" in spec:
            assert action.nargs == _default(spec["nargs"]), spec["flags"]
        if "choices" in spec:
            assert list(action.choices or ()) == _default(spec["choices"]), spec["flags"]
        if spec.get("action") == "'store_true'":
            assert action.const is True and action.default is False, spec["flags"]


def _gemm(tmp_path: Path) -> str:
    rng = np.random.default_rng(0)
    built = model(
        [node("Gemm", ["X", "w", "b"], ["g"], "gemm"), node("Relu", ["g"], ["Y"], "relu")],
        [vi("X", F32, [2, 5])],
        [vi("Y", F32, [2, 3])],
        [
            init("w", rng.standard_normal((5, 3)).astype(np.float32)),
            init("b", rng.standard_normal(3).astype(np.float32)),
        ],
        opset=17,
    )
    path = tmp_path / "gemm.onnx"
    onnx.save(built, path)
    return str(path)


def test_autocast_s_numpy_defaults_are_taken(tmp_path: Path) -> None:
    converted = convert_to_mixed_precision(
        onnx_path=_gemm(tmp_path), init_max=np.finfo(np.float16).max, data_max=np.float32(512)
    )
    assert converted.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16


def test_a_positional_call_in_autocast_s_order_works(tmp_path: Path) -> None:
    converted = convert_to_mixed_precision(
        _gemm(tmp_path),
        "bf16",
        None,
        None,
        None,
        None,
        np.float64(512),
        np.finfo(np.float16).max,
        np.bool_(True),
        None,
        None,
        None,
        ["cpu"],
        [],
        [],
        None,
        np.int64(22),
        False,
    )
    assert converted.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT  # keep_io_types
    assert any(n.op_type == "Gemm" for n in converted.graph.node)


@pytest.mark.parametrize("value", [np.float16(65504), np.float32(512), np.float64(np.inf), np.int32(8), 512, 8.5])
def test_thresholds_take_any_real_number_type(value: object) -> None:
    options = ConvertOptions(data_max=value, init_max=value)  # type: ignore[arg-type]
    assert type(options.data_max) is float and options.data_max == float(value)  # type: ignore[arg-type]


def test_numpy_bools_ints_and_strings_become_python_s() -> None:
    options = ConvertOptions(
        low_precision_type=np.str_("bf16"),
        keep_io_types=np.bool_(True),  # type: ignore[arg-type]
        opset=np.int64(22),
        op_types_to_exclude=(np.str_("Softmax"),),
    )  # type: ignore[arg-type]
    assert (options.low_precision_type, options.keep_io_types, options.opset) == ("bf16", True, 22)
    assert type(options.keep_io_types) is bool and type(options.opset) is int
    assert options.op_types_to_exclude == ("Softmax",) and type(options.op_types_to_exclude[0]) is str


@pytest.mark.parametrize("bad", [np.float32(np.nan), -1.0, "512", np.bool_(True)])
def test_non_numbers_and_negative_thresholds_are_still_refused(bad: object) -> None:
    with pytest.raises(Exception, match="threshold must be a non-negative number or inf"):
        ConvertOptions(data_max=bad)  # type: ignore[arg-type]


def test_main_takes_autocast_s_flags_with_empty_lists(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    converted = main(
        [
            "--onnx_path",
            _gemm(tmp_path),
            "--output_path",
            str(out),
            "--nodes_to_exclude",
            "--op_types_to_exclude",
            "-t",
            "fp16",
        ]
    )
    assert out.is_file() and converted.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
