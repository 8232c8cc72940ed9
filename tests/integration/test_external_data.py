"""``pytest --model`` on a model with external data (a few MB): golden, magnitudes, cached conversion and every
runner work with the weights left on disk; goldens hold inputs and outputs only."""

from __future__ import annotations

import json

import pytest

from harness.data.onnxfile import external_tensors, load_model, model_sha256
from tests.helpers.external import matmul_stack, save_external

pytest_plugins = ["pytester"]
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")


def test_pytest_model_with_external_data_end_to_end(pytester: pytest.Pytester) -> None:
    model = save_external(matmul_stack(), pytester.path / "models" / "stack.onnx")
    args = ("-p", "no:cacheprovider", "-rs", *ONE_CASE, "--runner", "emulate", "--runner=reference")
    first = pytester.runpytest(*args, "--model", "models/stack.onnx")
    first.assert_outcomes(passed=2, failed=1)  # the golden is written once and fails once, by design
    second = pytester.runpytest(*args, "--model=models/stack.onnx", "-v")
    second.assert_outcomes(passed=3)
    golden_dir = pytester.path / "goldens" / "models.stack"  # the key of models/stack.onnx (issue 9)
    assert sorted(p.suffix for p in golden_dir.iterdir()) == [".json", ".npz"]  # no copy of the model
    meta = json.loads(next(golden_dir.glob("*.json")).read_text())
    assert meta["model_sha256"] == model_sha256(model)  # covers weights.bin
    entries = sorted((pytester.path / ".castguard-cache" / "convert").glob("*.onnx"))
    assert len(entries) == 1 and entries[0].with_name(entries[0].name + ".data").is_file()
    converted = load_model(entries[0], weights="lazy")
    assert len(external_tensors(converted)) == 4


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_damaged_external_data_is_one_usage_error(pytester: pytest.Pytester, damage: str) -> None:
    model = save_external(matmul_stack(layers=2), pytester.path / "models" / "stack.onnx")
    data = model.with_name("weights.bin")
    if damage == "missing":
        data.unlink()
    else:
        data.write_bytes(data.read_bytes()[:4096])
    result = pytester.runpytest("-p", "no:cacheprovider", *ONE_CASE, "--model=models/stack.onnx")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "weights.bin" in err and ("is missing" if damage == "missing" else "is truncated") in err
    assert "fix:" in err and "Traceback" not in err + result.stdout.str()
    assert not (pytester.path / "goldens").exists()
