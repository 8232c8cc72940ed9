"""The one child-process helper (harness/core/child.py): JSON in and out, a time-out, a crash as a typed error, and
child scripts that import only what they may (PYTHONPROFILEIMPORTTIME lists every import of the child)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from harness.convert.reference import REFRUN
from harness.core import ortenv
from harness.core.child import ChildFailed, run_child
from harness.runners.tensorrt.typed_build import BUILD_SCRIPT
from tests.helpers.graphs import IR_VERSION

ECHO = (
    "from harness.core.child import read_request, write_answer\nprint('noise')\nwrite_answer({'got': read_request()})"
)
# what no child may load: the heavy parts of castguard, and onnx where the child never imported it before
HEAVY = (
    "harness.convert",
    "harness.data",
    "harness.runners.tensorrt.runner",
    "harness.runners.ort",
    "harness.pipeline",
    "harness.report",
    "harness.judge",
    "harness.plugin",
    "harness.core.dtypes",
    "pytest",
    "hypothesis",
)


def imported(stderr: str) -> set[str]:
    """Module names from ``PYTHONPROFILEIMPORTTIME`` lines (``import time: self | cumulative | name``)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    } - {"package"}


def ask(program: Path | str, request: object) -> tuple[object, set[str]]:
    done = run_child(
        program,
        request,
        what="test child",
        timeout_s=120,
        env={**__import__("os").environ, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    return done.answer, imported(done.stderr)


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith(HEAVY))


def test_json_round_trip_ignores_other_output() -> None:
    assert run_child(ECHO, {"a": [1, 2.5, None]}, what="echo", timeout_s=60).answer == {"got": {"a": [1, 2.5, None]}}


@pytest.mark.parametrize(
    ("code", "kind", "said"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "signal", "crashed with SIGSEGV"),
        ("import sys; sys.stderr.write('boom'); sys.exit(3)", "exit", "exit status 3: boom"),
        ("print('no marker')", "no-answer", "finished without an answer"),
        ("import time; time.sleep(30)", "timeout", "no answer within 0.5 s"),
    ],
)
def test_a_failed_child_is_one_typed_error(code: str, kind: str, said: str) -> None:
    if kind == "signal" and sys.platform == "win32":
        pytest.skip("POSIX signals")
    with pytest.raises(ChildFailed) as err:
        run_child(code, None, what="the probe", timeout_s=0.5 if kind == "timeout" else 60)
    assert err.value.kind == kind and said in err.value.reason and str(err.value).startswith("the probe: ")
    if kind == "signal":
        assert err.value.signal == "SIGSEGV" and err.value.returncode == -signal.SIGSEGV


def test_the_reference_run_child_imports_numpy_and_onnxruntime_only(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    np.savez(tmp_path / "b0.npz", x=np.array([[-1, 2, -3, 4]], np.float32))
    answer, modules = ask(
        REFRUN,
        {
            "model": str(tmp_path / "m.onnx"),
            "providers": [["CPUExecutionProvider", {}]],
            "batches": [str(tmp_path / "b0.npz")],
            "groups": None,
            "external_folder": None,
        },
    )
    assert isinstance(answer, dict) and answer["absmax"]["y"] == 4.0
    assert {"numpy", "onnxruntime", "harness.core.child"} <= modules
    assert heavy(modules) == [] and "onnx" not in modules


def test_the_tensorrt_build_child_imports_the_standard_library_only() -> None:
    answer, modules = ask(
        BUILD_SCRIPT,
        {
            "module": "castguard_no_such_tensorrt",
            "source": "",
            "path_hint": None,
            "profile": {},
            "nodes": [],
            "plan_out": None,
        },
    )
    assert isinstance(answer, dict) and answer["stage"] == "unavailable"
    assert "castguard_no_such_tensorrt cannot be loaded" in answer["error"]
    assert heavy(modules) == [] and not {"numpy", "onnx", "onnxruntime"} & modules
    assert not [
        m
        for m in modules
        if m.startswith("harness.")
        and m not in ("harness.core", "harness.core.child", "harness.core.errors", "harness.core.version")
    ]


def test_the_capability_probe_children_import_no_castguard_module() -> None:
    kernels, modules = ask(ortenv._KERNELS, None)
    assert isinstance(kernels, list) and ["", "Cast"] in kernels  # a bf16 Cast kernel: every onnxruntime has one
    assert heavy(modules) == [] and "onnx" not in modules and "onnxruntime" in modules
    cuda, modules = ask(ortenv._CUDA_SESSION, None)
    assert isinstance(cuda, bool) and heavy(modules) == []
