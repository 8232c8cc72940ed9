"""Issue 33 items 1-2: every planned case has a record in the report, whatever happens to it, and such a run is
never clean. Each run is ``python -m pytest`` in a project folder of its own (with a space in its name), on
models built here: a sweep case that wrote the golden (its golden test deselected with ``-k``, and under
``-n 2``), a model whose golden cannot be made, runner plugins that raise, return object arrays or exit, a tuned
case whose stored plan is unreadable, and cases never reached (``-x``)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from onnx import TensorProto, helper

from tests.conftest import CastguardDone, Run
from tests.helpers.graphs import make_model, mlp_model, save

TWO_CASES = ("--precision", "fp16,bf16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")
BAD_RUNNERS = textwrap.dedent(
    """
    import numpy as np
    from harness.runners.emulate import EmulateRunner

    class Boom(EmulateRunner):
        precisions = ("fp16", "bf16")
        rounds_low_precision = True

        def infer_impl(self, feed):
            raise ValueError("the plugin's own bug")

    class Objects(Boom):
        def infer_impl(self, feed):
            return {name: np.array([object()] * 4, dtype=object) for name in self._out_dtypes}

    class Exits(Boom):
        def infer_impl(self, feed):
            raise SystemExit(3)
    """
)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "my project"
    save(mlp_model(), project / "mlp.onnx")
    (project / "pyproject.toml").write_text("[tool.castguard]\n")
    return project


def _complete(done: CastguardDone) -> list[dict[str, Any]]:
    """The report has a record for every planned case, and the run failed (it is never a clean baseline)."""
    assert done.report is not None, done.output[-3000:]
    assert done.report["planned_cases"] == len(done.cases), done.output[-3000:]
    assert done.proc.returncode != 0, done.output[-3000:]
    return done.cases


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_case_that_wrote_the_golden_is_recorded(castguard_in: Run, tmp_path: Path, xdist: tuple[str, ...]) -> None:
    project = _project(tmp_path)
    done = castguard_in(project, "-k", "low_precision", "--model", "mlp.onnx", *TWO_CASES, *xdist)
    cases = _complete(done)
    assert len(cases) == 2
    wrote = [c for c in cases if c["stopped"] == "golden_written"]
    assert wrote and all(c["status"] == "error" and "golden written" in c["message"] for c in wrote)
    assert {c["status"] for c in cases} <= {"error", "pass"}
    again = castguard_in(project, "-k", "low_precision", "--model", "mlp.onnx", *TWO_CASES, *xdist)
    assert again.proc.returncode == 0 and [c["status"] for c in again.cases] == ["pass", "pass"], again.output[-2000:]


def test_a_golden_that_cannot_be_made_fails_a_cases_only_xdist_run(castguard_in: Run, tmp_path: Path) -> None:
    project = tmp_path / "my project"
    mask = make_model(
        [helper.make_node("Add", ["x", "mask"], ["y"], name="add_mask")],
        [("x", TensorProto.FLOAT, [1, "s"]), ("mask", TensorProto.FLOAT, [1, "m"])],
        [("y", TensorProto.FLOAT, [1, "s"])],
    )
    save(mask, project / "mask.onnx")
    args = ("-n", "2", "-k", "low_precision", "--model", "mask.onnx", "--input-shapes", "x:1x8,mask:1x5")
    done = castguard_in(project, *args, *TWO_CASES)
    cases = _complete(done)
    assert [c["stopped"] for c in cases] == ["golden_not_made"] * 2
    assert all(c["status"] == "skip" and "no golden for 'mask'" in c["message"] for c in cases)


def test_runners_that_raise_return_objects_or_exit_are_recorded(castguard_in: Run, tmp_path: Path) -> None:
    project = _project(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "bad_runners.py").write_text(BAD_RUNNERS)
    info = site / "bad_runners-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-runners\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[castguard.runners]\nboom = bad_runners:Boom\nobjects = bad_runners:Objects\nexits = bad_runners:Exits\n"
    )
    runners = ("--runner", "boom", "--runner", "objects", "--runner", "exits", "--runner", "emulate")
    done = castguard_in(project, "--model", "mlp.onnx", *TWO_CASES, *runners, extra_path=[site])
    cases = _complete(done)
    by_runner = {(c["case"]["runner"], c["case"]["precision"]): c for c in cases}
    assert len(cases) == 8 and len(by_runner) == 8
    for precision in ("fp16", "bf16"):
        boom, objects = by_runner["boom", precision], by_runner["objects", precision]
        assert boom["status"] == "error" and "runner boom raised ValueError: the plugin's own bug" in boom["message"]
        assert objects["status"] == "error" and "returned an object array" in objects["message"]
        exits = by_runner["exits", precision]
        # a plugin runs in a child (runners/isolated.py): its exit fails only its case, recorded where it stopped
        assert exits["status"] == "error" and exits["stopped"] == "error"
        assert "runner exits" in exits["message"] and "exited with status 3" in exits["message"]
        assert by_runner["emulate", precision]["status"] == "pass"


def test_a_tuned_case_with_an_unreadable_plan_is_recorded(castguard_in: Run, tmp_path: Path) -> None:
    project = _project(tmp_path)
    first = castguard_in(project, "--model", "mlp.onnx", "--tune", "-k", "fp32_golden or tuned", *TWO_CASES[:2])
    assert first.proc.returncode == 1, first.output[-3000:]  # the golden is written now
    plans = sorted((project / "goldens").rglob("*.plan.json"))
    assert len(plans) == 2, first.output[-3000:]  # one tuned plan per precision
    for plan in plans:
        plan.write_text("{not json")
    done = castguard_in(project, "--model", "mlp.onnx", "--tune", "-k", "tuned", *TWO_CASES[:2])
    cases = _complete(done)
    tuned = [c for c in cases if c["case"]["tuned"]]
    assert len(tuned) == 2 and all(c["status"] == "error" for c in tuned), done.output[-3000:]
    assert all("unreadable tuned plan" in c["message"] and c["stopped"] == "error" for c in tuned)


def test_cases_never_reached_are_recorded(castguard_in: Run, tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = castguard_in(project, "-x", "--model", "mlp.onnx", *TWO_CASES)  # the golden test fails: stop
    cases = _complete(done)
    assert [c["stopped"] for c in cases] == ["not_reached"] * 2 and done.report is not None
    assert done.report["interrupted"] and all(c["status"] == "error" for c in cases)
    assert "interrupted after 0 of 2 cases" in done.output
