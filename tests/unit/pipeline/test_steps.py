"""Each step of the case pipeline on a hand-made :class:`CaseRun` (issue 29): ``step(run, env) -> run`` fills its own
field (or stops the case), and nothing else. The model is built here; its golden and context are made by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.convert import collect_magnitudes
from harness.core.errors import DiskFull, RunnerError
from harness.data.goldens import Golden
from harness.data.models import resolve_model
from harness.pipeline.cache import ContentCache
from harness.pipeline.case import SWEEP_STEPS, run_steps
from harness.pipeline.caserun import CaseEnv, CaseRun, Stop
from harness.pipeline.context import CaseSettings, ModelContext
from harness.pipeline.dedup import SameModels
from harness.pipeline.steps import record as record_step
from harness.pipeline.steps.convert import build_check_step, check_runnable, convert_step
from harness.pipeline.steps.diagnose import diagnose_step
from harness.pipeline.steps.duplicate import find_duplicate
from harness.pipeline.steps.execute import execute_step, guarded_run, time_step
from harness.pipeline.steps.judge import judge_step
from harness.pipeline.steps.record import record, save_step, settle_save, settle_step
from harness.pipeline.verdict import decide, settled
from harness.runners import make_runner, runner_traits
from harness.sweep import SweepPoint
from tests.helpers.graphs import cancellation_model, mlp_model, save


def _case_run(tmp_path: Path, *, model: str = "mlp", runner: str = "emulate", precision: str = "fp16") -> CaseRun:
    """A case of a model built here, with its golden (ORT FP32) and magnitudes made by hand."""
    proto = mlp_model() if model == "mlp" else cancellation_model()
    spec = resolve_model(str(save(proto, tmp_path / f"{model}.onnx")), search_dir=tmp_path)
    rng = np.random.default_rng(0)
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    feeds = [{proto.graph.input[0].name: rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)}]
    outputs = make_runner("ort", proto).run(feeds).outputs
    ctx = ModelContext(
        spec=spec,
        model=proto,
        golden=Golden(feeds=feeds, outputs=outputs, meta={}),
        golden_path=tmp_path / "golden.npz",
        golden_file="golden.npz",
        inputs_id="hand",
        magnitudes=collect_magnitudes(proto, feeds=feeds),
        magnitudes_key="hand",
        magnitudes_s=0.0,
    )
    point = SweepPoint(precision=precision, runner=runner, keep_io_types=True)
    traits = runner_traits(runner)
    providers = ("CPUExecutionProvider",) if traits.takes_providers else ()
    return CaseRun(
        model=spec.name,
        model_sha256=spec.sha256,
        inputs_id="hand",
        point=point,
        traits=traits,
        providers=providers,
        ctx=ctx,
    )


def _env(tmp_path: Path, same: SameModels | None = None) -> CaseEnv:
    return CaseEnv(
        settings=CaseSettings(report_dir=tmp_path / "report"), cache=ContentCache(tmp_path / "cache"), same=same
    )


def test_check_runnable_stops_only_what_the_runner_cannot_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    bf16_on_cpu = check_runnable(_case_run(tmp_path, runner="ort", precision="bf16"), env)
    assert bf16_on_cpu.stop is not None and bf16_on_cpu.stop.kind == "cannot_run"
    fine = _case_run(tmp_path, runner="ort")
    assert check_runnable(fine, env) == fine


def test_convert_fills_converted_and_build_check_only_when_asked(tmp_path: Path) -> None:
    env = _env(tmp_path)
    run = convert_step(_case_run(tmp_path), env)
    assert run.converted is not None and run.converted.conversion.low_nodes and not run.converted.cached
    assert convert_step(_case_run(tmp_path), env).converted.cached  # type: ignore[union-attr]
    assert build_check_step(run, env) == run  # --trt-build-check not asked


def test_find_duplicate_reuses_an_identical_conversion(tmp_path: Path) -> None:
    same = SameModels()
    env = _env(tmp_path, same)
    first = run_steps(_case_run(tmp_path), env, SWEEP_STEPS)
    assert first.stop is None and first.duplicate is not None and first.duplicate.first is None
    same.remember(first.duplicate.graph, first.duplicate.plan, record(first))
    again = find_duplicate(convert_step(_case_run(tmp_path), env), env)
    assert again.stop == Stop("reused") and again.duplicate is not None and again.duplicate.kind == "graph"
    assert find_duplicate(convert_step(_case_run(tmp_path), env), replace(env, same=None)).duplicate is None


def test_execute_fills_outputs_and_a_raising_runner_is_a_runner_error(tmp_path: Path) -> None:
    env = _env(tmp_path)
    run = execute_step(convert_step(_case_run(tmp_path), env), env)
    assert run.executed is not None and run.executed.rounds_low_precision and run.executed.infer_s > 0
    runner = make_runner("emulate", run.converted.conversion.model)  # type: ignore[union-attr]
    runner.infer_impl = lambda feed: (_ for _ in ()).throw(KeyError("boom"))  # type: ignore[method-assign]
    with pytest.raises(RunnerError, match="runner emulate raised KeyError"):
        guarded_run(runner, run.context.golden.feeds, name="emulate")


def test_judge_fills_the_comparison_and_decide_gives_the_status(tmp_path: Path) -> None:
    env = _env(tmp_path)
    judged = judge_step(execute_step(convert_step(_case_run(tmp_path), env), env), env)
    assert judged.judged is not None and judged.judged.comparison and decide(judged).status == "pass"
    cpu = judge_step(execute_step(convert_step(_case_run(tmp_path, runner="ort"), env), env), env)
    assert decide(cpu).status == "skip" and "would pass" in decide(cpu).message


def test_diagnose_runs_for_a_failing_case_only(tmp_path: Path) -> None:
    env = _env(tmp_path)
    passing = judge_step(execute_step(convert_step(_case_run(tmp_path), env), env), env)
    assert diagnose_step(passing, env) == passing
    failing = judge_step(execute_step(convert_step(_case_run(tmp_path, model="cancel"), env), env), env)
    assert failing.judged is not None and not failing.judged.comparison
    diagnosed = diagnose_step(failing, env)
    assert diagnosed.diagnosed is not None and decide(diagnosed).message == diagnosed.diagnosed.message


def test_time_fills_the_speed_note_of_a_runner_that_claims_none(tmp_path: Path) -> None:
    env = _env(tmp_path)
    timed = time_step(convert_step(_case_run(tmp_path), env), env)
    assert timed.timed is not None and timed.timed.speed.latency_ms is None and "emulate" in timed.timed.speed.note


def test_save_writes_the_outputs_and_record_reads_every_field(tmp_path: Path) -> None:
    env = _env(tmp_path)
    run = settle_save(run_steps(_case_run(tmp_path), env, SWEEP_STEPS))
    assert run.saved is not None and run.saved.pending is None
    assert (tmp_path / "report" / run.saved.outputs_file).is_file()
    assert run.executed is not None and run.executed.outputs == []  # the case holds them no more
    made = record(run)
    assert (made.status, made.stopped, made.outputs_file) == ("pass", "", run.saved.outputs_file)
    assert made.timings.convert_s > 0 and made.outputs and made.low_nodes


def test_save_writes_while_the_judge_runs_and_a_failed_write_stops_the_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path)
    executed = execute_step(convert_step(_case_run(tmp_path), env), env)
    saving = save_step(executed, env)
    assert saving.saved is not None and saving.saved.pending is not None
    judged = judge_step(saving, env)  # the outputs are still the case's while they are written
    assert judged.judged is not None and judged.judged.comparison
    settled = settle_step(judged, env)
    assert settled.saved is not None and settled.saved.pending is None and settled.executed is not None
    assert settled.executed.outputs == [] and (tmp_path / "report" / settled.saved.outputs_file).is_file()

    def full_disk(folder: Path, relpath: str, outputs: object) -> Path:
        raise DiskFull(folder=folder, name=relpath)

    monkeypatch.setattr(record_step, "save_outputs", full_disk)
    with pytest.raises(DiskFull, match="no space left"):
        settle_step(save_step(executed, env), env)
    stopped = run_steps(save_step(executed, env), env, [settle_step])  # the error: the case's stop
    assert stopped.stop is not None and stopped.stop.kind == "error" and "no space left" in stopped.stop.message
    late = settle_save(save_step(executed, env))  # a case stopped before settle_step: finish_case's wait
    assert late.stop is not None and "no space left" in late.stop.message and late.saved is not None
    assert late.saved.pending is None and record(late).status == "error"


def test_a_stopped_case_is_recorded_with_where_and_why(tmp_path: Path) -> None:
    run = replace(_case_run(tmp_path), stop=Stop("golden_written", "golden written: g.npz"))
    assert run_steps(run, _env(tmp_path), SWEEP_STEPS) == run  # no step runs after a stop
    made = record(run)
    assert (made.status, made.stopped, made.message) == ("error", "golden_written", "golden written: g.npz")
    unavailable = replace(_case_run(tmp_path), stop=Stop("unavailable", "no GPU here"))
    assert (record(unavailable).status, record(unavailable).stopped) == ("skip", "unavailable")


def test_settled_marks_expected_failures(tmp_path: Path) -> None:
    made = record(run_steps(_case_run(tmp_path), _env(tmp_path), SWEEP_STEPS))
    assert settled(made, expected_failure=True).status == "xpass"
    assert settled(made, expected_failure=False).status == "pass"
