"""``castguard tune`` end to end on models built in code: the bound, the share, the replay, the cache, bad input.

Each test works from an empty folder (``tmp_path``) as a user would, through ``harness.cli.main``; one test runs
the real console entry point in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from harness.cli import main
from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.convert.calibration import random_feeds
from harness.data.feeds import cast_feeds, input_specs
from harness.runners import make_runner
from harness.tune.bound import Bound, measure
from harness.tune.oracle import fp32_outputs
from test_models import tune_models

REPO = Path(__file__).resolve().parents[3]


def _save(folder: Path, name: str, model: onnx.ModelProto) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return path


def _emulate_error(model_path: Path, converted: onnx.ModelProto) -> float:
    """Independent check: the normalized max error of ``converted`` on emulate, on the tune's default data."""
    model = onnx.load(model_path)
    feeds = random_feeds(model, seed=0, input_shapes=None)[0]
    gold = fp32_outputs(model, feeds, model_dir=None)
    got = make_runner("emulate", converted).run(cast_feeds(feeds, input_specs(converted))).outputs
    return measure(got, gold, Bound()).ratio * 1e-3


def _tune(tmp: Path, model: Path, *extra: str) -> tuple[int, dict[str, object]]:
    code = main(
        [
            "tune",
            "--onnx_path",
            str(model),
            "--output_path",
            str(tmp / "out.onnx"),
            "--quiet",
            "--adversarial_examples",
            "3",
            "--cache_dir",
            str(tmp / "cache"),
            *extra,
        ]
    )
    plan = tmp / "out.plan.json"
    return code, (json.loads(plan.read_text()) if plan.exists() else {})


def test_default_fails_the_bound_and_tune_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path, "residual_cancel", tune_models.residual_cancel())
    model = onnx.load(path)
    default = convert(model, options=ConvertOptions(), magnitudes=collect_magnitudes(model))
    assert default.high_nodes == () or all("schema" in r for _, r in default.high_nodes)
    assert _emulate_error(path, default.model) > 1e-3  # the default conversion misses the bound

    code, plan = _tune(tmp_path, path)
    assert code == 0
    assert sorted(plan["kept_fp32"]) == ["cancel_sub", "residual_add"]  # type: ignore[arg-type]
    assert plan["error"]["y"] <= 1e-3  # type: ignore[index]
    assert _emulate_error(path, onnx.load(tmp_path / "out.onnx")) <= 1e-3
    assert plan["lowp_flop_share"] > 0.9  # type: ignore[operator]
    assert plan["model_sha256"] and plan["castguard_version"] and plan["seconds"] >= 0  # type: ignore[operator]
    assert "the bound fails" in plan["why"]["cancel_sub"]  # type: ignore[index]
    candidates, kept = int(plan["candidates"]), len(plan["kept_fp32"])  # type: ignore[arg-type, call-overload]
    import math

    assert plan["evaluations"] <= 2 * (kept + 1) * math.log2(candidates) + 10  # type: ignore[operator]


def test_default_too_strict_tune_moves_more_to_fp16(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path, "wide", tune_models.wide_activations())
    model = onnx.load(path)
    default = convert(model, options=ConvertOptions(), magnitudes=collect_magnitudes(model))
    assert _emulate_error(path, default.model) <= 1e-3  # the default passes ...
    code, plan = _tune(tmp_path, path, "--max_error=1e-3", "--adversarial_examples=0")  # the search alone
    assert code == 0
    assert plan["lowp_flop_share"] > default.lowp_flop_share + 0.5  # type: ignore[operator]   # ... but keeps too much
    assert plan["error"]["logits"] <= 1e-3  # type: ignore[index]
    assert plan["evaluations"] == 1 and plan["kept_fp32"] == []
    # the hunt finds a corner of the input box where all-fp16 misses the bound; the next round keeps fc2 FP32
    code, hunted = _tune(tmp_path, path, "--max_error=1e-3", "--no_cache")
    assert code == 0 and hunted["holds"] is True and hunted["kept_fp32"] == ["fc2"]
    (counterexample,) = hunted["inputs"]["counterexamples"]  # type: ignore[index]
    assert counterexample["found_by"] == "corner search" and counterexample["error_over_bound"] > 1
    assert hunted["lowp_flop_share"] > default.lowp_flop_share + 0.4  # type: ignore[operator]


def test_plan_replays_byte_for_byte_through_convert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path, "residual_cancel", tune_models.residual_cancel())
    code, plan = _tune(tmp_path, path, "--low_precision_type", "fp16")
    assert code == 0 and plan["kept_fp32"]
    tuned = (tmp_path / "out.onnx").read_bytes()
    args = list(plan["replay"]["castguard_convert_args"])  # type: ignore[index]
    args[args.index("--output_path") + 1] = str(tmp_path / "replay.onnx")
    assert main(["convert", *args]) == 0
    assert (tmp_path / "replay.onnx").read_bytes() == tuned
    # the same plan as --node_precisions (names), with the tune's data_max
    assert (
        main(
            [
                "convert",
                "--onnx_path",
                str(path),
                "--output_path",
                str(tmp_path / "np.onnx"),
                "--data_max",
                "65504",
                "--node_precisions",
                str(plan["replay"]["node_precisions"]),
            ]
        )
        == 0
    )  # type: ignore[index]
    assert (tmp_path / "np.onnx").read_bytes() == tuned


def test_cache_replays_the_search_without_evaluations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path, "residual_cancel", tune_models.residual_cancel())
    code, first = _tune(tmp_path, path)
    assert code == 0 and first["evaluations"] >= 3 and first["evaluations_cached"] == 0
    code, second = _tune(tmp_path, path)
    assert code == 0 and second["evaluations"] == 0
    assert second["evaluations_cached"] == first["evaluations"]
    assert second["kept_fp32"] == first["kept_fp32"] and second["error"] == first["error"]
    code, other = _tune(tmp_path, path, "--max_error", "5e-4")  # another setting misses the cache
    assert code in (0, 1, 2) and (not other or other["evaluations_cached"] == 0)


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--max_error", "0", "positive finite"),
        ("--max_error", "-1e-3", "positive finite"),
        ("--max_error", "abc", "not a number"),
        ("--max_error", "nan", "positive finite"),
        ("--max_error", "nope=1e-3", "no model output named"),
        ("--budget", "0", "whole number >= 1"),
        ("--budget", "-4", "whole number >= 1"),
        ("--budget", "lots", "whole number >= 1"),
        ("--max_error", "1e-9", "unreachable"),
        ("--budget", "1", "budget of 1 evaluation"),
    ],
)
def test_bad_input_one_message_nothing_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
    expected: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path, "residual_cancel", tune_models.residual_cancel())
    code = main(
        [
            "tune",
            "--onnx_path",
            str(path),
            "--output_path",
            str(tmp_path / "out.onnx"),
            "--quiet",
            "--no_cache",
            f"{flag}={value}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err and "fix:" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["residual_cancel.onnx"]


def test_console_entry_from_an_empty_folder(tmp_path: Path) -> None:
    """The real ``python -m harness tune`` in a folder outside the repo, with --opt value spelling."""
    path = _save(tmp_path, "residual_cancel", tune_models.residual_cancel())
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "tune",
            "--onnx_path",
            str(path),
            "--max_error",
            "1e-3",
            "--budget",
            "50",
            "--adversarial_examples",
            "0",
            "--no_cache",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[castguard tune] evaluation 1/50" in proc.stderr  # progress on the terminal
    plan = json.loads((tmp_path / "residual_cancel.fp16.plan.json").read_text())
    assert (tmp_path / "residual_cancel.fp16.onnx").is_file() and plan["kept_fp32"]
    assert list(work.iterdir()) == []


def test_classifier_criteria_and_policy_are_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.castguard.tolerances]\nfp16 = { rtol = 0.05 }\n")
    path = _save(tmp_path, "wide", tune_models.wide_activations())
    code, plan = _tune(
        tmp_path,
        path,
        "--top1_outputs",
        "logits",
        "--min_top1=0.99",
        "--tolerance_policy",
        "--max_error",
        "logits=2e-3",
    )
    assert code == 0
    assert plan["bound"]["top1"] == {"outputs": ["logits"], "min_agreement": 0.99}  # type: ignore[index]
    assert plan["bound"]["tolerance_policy"] is True and plan["bound"]["per_output"] == {"logits": 2e-3}  # type: ignore[index]
    assert plan["top1"]["logits"] >= 0.99 and plan["error"]["logits"] <= 2e-3  # type: ignore[index]


@pytest.mark.parametrize("keep_io", [False, True])
def test_an_unreachable_bound_advises_keep_io_types_only_when_it_was_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], keep_io: bool
) -> None:
    """Issue 32.9: tune advised --keep_io_types to a user who had given it."""
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path, "residual_cancel", tune_models.residual_cancel())
    argv = ["tune", "--onnx_path", str(path), "--output_path", str(tmp_path / "out.onnx"), "--quiet", "--no_cache"]
    forced = ["--op_types_to_include", "MatMul"]  # forced low: even all candidates FP32 miss 1e-9
    code = main([*argv, *forced, "--max_error=1e-9", *(["--keep_io_types"] if keep_io else [])])
    err = capsys.readouterr().err
    assert code == 2 and "unreachable" in err
    fix = err.split("fix:", 1)[1]
    assert ("--keep_io_types" in fix) is not keep_io and "raise --max_error" in fix
