"""``castguard tune`` is deterministic (issue 33 item 13): the same command and inputs give the same exit code and
the same plan with a cold cache, a warm one, or one a larger run (or an interrupted one) left behind. Cached
evaluations count against ``--budget``; before, they were free, so a warm cache let the search go further (on this
model at 209c931: exit 1 cold, exit 2 warm, exit 0 after a run with a larger budget)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import onnx
import pytest

from harness.cli import main
from test_models import tune_models

pytestmark = pytest.mark.reliability
TIMING = ("seconds", "evaluations", "evaluations_cached")  # how long it took, and how much came from the cache


def tune(folder: Path, *, budget: int, cache: Path) -> tuple[int, dict[str, object]]:
    plan = folder / "out.plan.json"
    plan.unlink(missing_ok=True)
    args = ["tune", "--onnx_path", str(folder / "m.onnx"), "--output_path", str(folder / "out.onnx"), "--quiet"]
    args += ["--adversarial_examples", "3", "--budget", str(budget), "--cache_dir", str(cache)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    doc = json.loads(plan.read_text()) if plan.exists() else {}
    return code, {key: value for key, value in doc.items() if key not in TIMING}


def test_cold_warm_and_after_a_larger_run_give_one_verdict(tmp_path: Path) -> None:
    onnx.save(tune_models.residual_stack(), tmp_path / "m.onnx")
    cold = tune(tmp_path, budget=14, cache=tmp_path / "cold")
    assert cold[0] in (0, 1) and cold[1]["kept_fp32"]  # a plan, within a budget too small for the larger run's
    assert tune(tmp_path, budget=14, cache=tmp_path / "cold") == cold  # warm: every evaluation from the cache
    big = tune(tmp_path, budget=60, cache=tmp_path / "shared")  # fills the cache with more evaluations
    assert big[0] != 2
    assert tune(tmp_path, budget=14, cache=tmp_path / "shared") == cold  # the larger run's cache changes nothing
    short = tune(tmp_path, budget=3, cache=tmp_path / "short")
    assert short[0] == 2 and tune(tmp_path, budget=3, cache=tmp_path / "shared")[0] == 2
