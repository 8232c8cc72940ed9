"""Bad input from the issue's list: one clear message (file, problem, fix), non-zero exit, no traceback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.graphs import mlp_model, save

pytest_plugins = ["pytester"]


def _missing(path: Path) -> list[str]:
    return ["--model", str(path / "nope" / "model.onnx")]


def _truncated(path: Path) -> list[str]:
    data = mlp_model().SerializeToString()
    (path / "cut.onnx").write_bytes(data[: len(data) // 3])
    return ["--model", "cut.onnx"]


def _garbage(path: Path) -> list[str]:
    (path / "junk.onnx").write_text("this is not a model")
    return ["--model", "junk.onnx"]


def _npz(path: Path, **arrays: np.ndarray) -> list[str]:
    save(mlp_model(), path / "mlp.onnx")
    np.savez(path / "in.npz", **arrays)
    return ["--model", "mlp.onnx", "--inputs", "in.npz"]


def _pickled(path: Path) -> list[str]:
    save(mlp_model(), path / "mlp.onnx")
    np.savez(path / "in.npz", x=np.array([{"x": 1}], dtype=object), allow_pickle=True)
    return ["--model", "mlp.onnx", "--inputs", "in.npz"]


def _unknown_range(path: Path) -> list[str]:
    save(mlp_model(), path / "mlp.onnx")
    return ["--model", "mlp.onnx", "--val-range", "image:[0,1]"]


CASES: dict[str, tuple[Callable[[Path], list[str]], str, str]] = {
    "missing-model": (_missing, "model.onnx", "no such file"),
    "truncated-model": (_truncated, "cut.onnx", "not an ONNX model"),
    "garbage-model": (_garbage, "junk.onnx", "not an ONNX model"),
    "wrong-input-names": (lambda p: _npz(p, image=np.zeros((1, 8), np.float32)), "in.npz", "names do not match"),
    "wrong-input-shape": (lambda p: _npz(p, x=np.zeros((1, 9), np.float32)), "in.npz", "the model declares [1,8]"),
    "wrong-input-dtype": (lambda p: _npz(p, x=np.zeros((1, 8), np.float64)), "in.npz", "dtype float64"),
    "pickled-npz": (_pickled, "in.npz", "pickled Python objects"),
    "unknown-val-range": (_unknown_range, "--val-range", "no input named 'image'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_clear_usage_error(pytester: pytest.Pytester, case: str) -> None:
    make_args, where, problem = CASES[case]
    result = pytester.runpytest("-p", "no:cacheprovider", *make_args(pytester.path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.lstrip().startswith("ERROR: ") and where in err and problem in err and "fix:" in err
    assert "Traceback" not in err + result.stdout.str()


def test_golden_for_a_different_model_fails_with_the_fix(pytester: pytest.Pytester) -> None:
    save(mlp_model(), pytester.path / "mlp.onnx")
    pytester.runpytest("-p", "no:cacheprovider", "--model", "mlp.onnx")
    save(mlp_model(seed=1), pytester.path / "mlp.onnx")
    result = pytester.runpytest("-p", "no:cacheprovider", "--model", "mlp.onnx")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "goldens/mlp/" in out and "sha256" in out and "--update-goldens" in out and "Traceback" not in out


def test_cli_user_error_exits_2_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "junk.onnx").write_text("garbage")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "goldens",
            "--model",
            str(tmp_path / "junk.onnx"),
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "junk.onnx" in proc.stderr and "fix:" in proc.stderr and "Traceback" not in proc.stderr
