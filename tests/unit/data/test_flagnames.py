"""A hint names only flags its reader can pass (issue 34 item 8, harness.data.flagnames).

``castguard convert`` and ``castguard tune`` share the feed rules with ``pytest --model``, but not its options:
they have no ``--val-range`` and take real data as ``--calibration_data``, not ``--inputs``. Each case below runs
the real command on a model built here that triggers a hint (an integer input of unknown meaning, a shape-like
input, a dynamic dim, bad sizes, an output over its input) and checks that every ``--flag`` in what it printed is
one that the same command's ``--help`` lists (either spelling: harness.core.argv); tune's plan file counts too.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from harness.cli import main
from harness.core.argv import respell
from harness.data.flagnames import CONVERT_FLAGS, PYTEST_FLAGS
from tests.helpers.graphs import make_model, save

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")
OTHER_TOOLS = re.compile(r"[Pp]olygraphy(?: run)? --[\w-]+")  # another tool's flag, named as such


def _int_input() -> onnx.ModelProto:
    """An int64 input castguard cannot tell the meaning of (Cast to float, added to x)."""
    nodes = [helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT), helper.make_node("Add", ["x", "nf"], ["y"])]
    return make_model(
        nodes, [("x", TensorProto.FLOAT, [2, 4]), ("n", TensorProto.INT64, [2, 4])], [("y", TensorProto.FLOAT, [2, 4])]
    )


def _shape_input() -> onnx.ModelProto:
    """An int64 input that is a Reshape's target shape: random data cannot invent one."""
    return make_model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [("x", TensorProto.FLOAT, [2, 4]), ("s", TensorProto.INT64, [2])],
        [("y", TensorProto.FLOAT, ["a", "b"])],
    )


def _dynamic() -> onnx.ModelProto:
    return make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [("x", TensorProto.FLOAT, ["batch", "seq"])],
        [("y", TensorProto.FLOAT, ["batch", "seq"])],
    )


CASES = {  # name: (command, model, extra flags, a flag the hint must name: the case is not vacuous)
    "convert-int-input": ("convert", _int_input, [], "--calibration_data"),
    "convert-shape-input": ("convert", _shape_input, [], None),
    "convert-dynamic-dims": ("convert", _dynamic, [], "--input_shapes"),
    "convert-unknown-input-shape": ("convert", _dynamic, ["--input_shapes", "q:1x2"], "--input-shapes"),
    "convert-zero-dim": ("convert", _dynamic, ["--input_shapes", "x:0x2"], "--input-shapes"),
    "convert-too-large": ("convert", _dynamic, ["--input_shapes", "x:100000x1000000"], "--input-shapes"),
    "convert-onto-input": ("convert", _dynamic, ["--output_path", "{model}"], "--force"),
    "tune-int-input": ("tune", _int_input, ["--adversarial_examples", "0"], "--calibration_data"),
    "tune-shape-input": ("tune", _shape_input, [], "--calibration_data"),
    "tune-dynamic-dims": ("tune", _dynamic, [], "--input_shapes"),
}


def _help_flags(command: str, capsys: pytest.CaptureFixture[str]) -> frozenset[str]:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return frozenset(FLAG.findall(capsys.readouterr().out))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_flag_in_a_hint_is_the_commands_own(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    command, build, extra, named = CASES[case]
    accepted = _help_flags(command, capsys)
    model = save(build(), tmp_path / "m.onnx")
    args = [a.replace("{model}", str(model)) for a in extra]
    if "--output_path" not in args:
        args += ["--output_path", str(tmp_path / "out.onnx")]
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        main([command, "--onnx_path", str(model), *(["--no_cache"] if command == "tune" else []), *args])
    printed = capsys.readouterr()
    plan = tmp_path / "out.plan.json"  # tune's plan says what its inputs were, hints included
    written = plan.read_text(encoding="utf-8") if plan.is_file() else ""
    said = OTHER_TOOLS.sub("", "\n".join([printed.out, printed.err, caplog.text, written]))
    flags = set(FLAG.findall(said))
    foreign = {f for f in flags if respell([f], accepted)[0] not in accepted}
    assert not foreign, f"castguard {command} suggests flags it refuses: {sorted(foreign)}\n{said}"
    assert "--val-range" not in said and "--inputs " not in said, said
    if named is not None:
        assert named in flags, said


def test_pytest_hints_keep_pytests_flags() -> None:
    assert PYTEST_FLAGS.range_fix("n") == "set --val-range n:[lo,hi] or pass --inputs FILE"
    assert CONVERT_FLAGS.range_fix("n") == "pass real values with --calibration_data FILE.npz"
    assert "--val-range s:[lo,hi]" in PYTEST_FLAGS.real_values_fix("s")
    assert "--val-range" not in CONVERT_FLAGS.real_values_fix("s") + CONVERT_FLAGS.default_range_note()
