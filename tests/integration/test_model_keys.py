"""Goldens keyed by a stable unique model key, and the rerun command of a written golden (issue 9, section 4);
a BERT-like export with dynamic batch and sequence, from an empty folder (section 2)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Run
from tests.helpers.graphs import bert_like_model, mlp_model, save
from tests.integration.test_any_folder import ONE_CASE, pytest_in

pytest_plugins = ["pytester"]


SUITE_ARGS = (*ONE_CASE,)  # the options of most runs here


def test_two_models_named_model_onnx_get_their_own_goldens(
    pytester: pytest.Pytester, tmp_path: Path, castguard_in: Run
) -> None:
    save(mlp_model(seed=1), pytester.path / "a" / "model.onnx")
    save(mlp_model(seed=2), pytester.path / "b" / "model.onnx")
    outside = save(mlp_model(seed=3), tmp_path / "elsewhere" / "model.onnx")
    castguard_in(
        pytester,
        *SUITE_ARGS,
        "--model",
        "a/model.onnx",
        "--model",
        "b/model.onnx",
        "--model",
        str(outside),
        "--model",
        f"mine={outside}",
    ).assert_outcomes(passed=4, failed=4)  # four goldens written
    keys = {p.name for p in (pytester.path / "goldens").iterdir()}
    hashed = [k for k in keys if k.startswith("model-")]  # outside the project: stem + path hash
    assert keys - set(hashed) == {"a.model", "b.model", "mine"} and len(hashed) == 1 and len(hashed[0]) == 14
    castguard_in(
        pytester,
        *SUITE_ARGS,
        "--model",
        "a/model.onnx",
        "--model",
        "b/model.onnx",
        "--model",
        str(outside),
        "--model",
        f"mine={outside}",
    ).assert_outcomes(passed=8)  # nothing overwrote another
    clash = castguard_in(pytester, *SUITE_ARGS, "--model", "a/model.onnx", "--model", f"a.model={outside}")
    assert clash.ret == pytest.ExitCode.USAGE_ERROR and "OTHERKEY=" in clash.stderr.str()


def test_the_golden_written_message_prints_a_rerun_command_that_keeps_the_input_options(
    pytester: pytest.Pytester, tmp_path: Path, castguard_in: Run
) -> None:
    model = save(mlp_model(), tmp_path / "models" / "mlp.onnx")
    first = castguard_in(pytester, *SUITE_ARGS, "--model", str(model), "--val-range", "x:[0,2]", "--seed", "3")
    first.assert_outcomes(passed=1, failed=1)
    line = next(line for line in first.stdout.lines if "fix: review it, commit it, and rerun:" in line)
    command = shlex.split(line.split("`")[1])
    assert command[:3] == ["pytest", "--model", str(model)] and "x:[0,2]" in command and "3" in command
    castguard_in(pytester, *SUITE_ARGS, *command[1:]).assert_outcomes(passed=2)  # the command finds that golden


def test_a_bert_export_with_dynamic_batch_and_sequence_from_an_empty_folder(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    model = save(bert_like_model(), tmp_path / "export" / "bert.onnx")
    refused = pytest_in(empty, "--model", str(model), *ONE_CASE)
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR and "Traceback" not in refused.stderr
    assert "input 'input_ids' dim 1 ('sequence')" in refused.stderr
    assert "--input-shapes input_ids:1x128" in refused.stderr and len(refused.stderr.splitlines()) <= 3

    shapes = ["--input-shapes", "input_ids:[2,64]"]
    first = pytest_in(empty, "--model", str(model), *shapes, *ONE_CASE)
    assert "1 failed, 1 passed" in first.stdout, first.stdout[-3000:] + first.stderr[-3000:]
    assert "input_ids int64[2x64]: ids uniform in [0, 30522)" in first.stdout  # the terminal summary
    second = pytest_in(empty, "--model", str(model), *shapes, *ONE_CASE)
    assert "2 passed" in second.stdout, second.stdout[-3000:]
    report_md = (empty / "castguard-report" / "report.md").read_text()
    assert "input_ids int64[2x64]: ids uniform in [0, 30522)" in report_md
    assert "attention_mask int64[2x64]: uniform in [0, 1]: castguard cannot tell" in report_md
    assert "dim 'batch' of attention_mask, token_type_ids = 2" in report_md
    case = json.loads((empty / "castguard-report" / "report.json").read_text())["cases"][0]
    assert any(note.startswith("inputs: ") for note in case["notes"])
    golden = next((empty / "goldens").rglob("*.npz"))
    with np.load(golden) as stored:
        ids = stored["input/0/input_ids.npy" if "input/0/input_ids.npy" in stored.files else "input/0/input_ids"]
    assert ids.shape == (2, 64) and ids.max() < 30522 and (ids > 15000).sum() > 20 and (ids < 15000).sum() > 20
