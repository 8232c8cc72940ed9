"""Runner traits, not names (issue 29): a runner plugin registered through the ``castguard.runners`` entry points
that declares a trait gets from the case pipeline exactly what a built-in that declares it gets.

The plugins are built here (a module and a real ``*.dist-info`` on ``sys.path``, as pip would install them); each
is the emulate runner under another name with one declared trait, beside ``plain`` which declares none.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.config import HarnessConfig
from harness.convert import convert_to_mixed_precision
from harness.diagnose.profile import ModelPair
from harness.judge.tolerances import TolerancePolicy
from harness.pipeline.case import SWEEP_STEPS, run_steps
from harness.pipeline.caserun import BuildChecked, CaseEnv, CaseRun
from harness.pipeline.session import AccuracySession, Case
from harness.pipeline.steps.convert import convert_step
from harness.pipeline.steps.duplicate import find_duplicate
from harness.pipeline.steps.record import record
from harness.pipeline.verdict import decide
from harness.runners import runner_traits
from harness.runners.registry import registered
from harness.runners.tensorrt.typed_build import TrtBuild
from harness.sweep import SweepPoint, SweepSpec
from tests.helpers.graphs import mlp_model, save

PLUGINS = textwrap.dedent(
    """
    from harness.runners.emulate import EmulateRunner
    from harness.runners.traits import RunnerTraits, SpeedClaim

    class Plain(EmulateRunner):
        precisions = ("fp16", "bf16")
        rounds_low_precision = True
        isolated = False  # in castguard's process: the test reads what the runner saw

    class Exact(Plain):
        traits = RunnerTraits(computes_exact_plan=True)

    class Fast(Plain):
        traits = RunnerTraits(speed=SpeedClaim(when="always"))

    class Providers(Plain):
        traits = RunnerTraits(takes_providers=True, cpu_precisions=("fp16",))
        seen = []

        def __init__(self, model, *, model_dir=None, providers=()):
            super().__init__(model, model_dir=model_dir)
            Providers.seen.append(tuple(providers))

    class Deploys(Plain):
        traits = RunnerTraits(deploys_to="tensorrt")

    class Device(Plain):
        traits = RunnerTraits(device_providers=("XpuExecutionProvider",))

    class Placed(Plain):
        traits = RunnerTraits(reports_cpu_placement=True)

        def profile_placement(self, feed):
            return ["mm1 (Gemm)"]
    """
)
NAMES = {"plain": "Plain", "exact": "Exact", "fast": "Fast", "providers": "Providers", "deploys": "Deploys"}
NAMES["placed"] = "Placed"
NAMES["device"] = "Device"


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "traits_plugins.py").write_text(PLUGINS)
    info = site / "traits_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: traits-plugins\nVersion: 0.1\n")
    lines = "\n".join(f"{name} = traits_plugins:{cls}" for name, cls in NAMES.items())
    (info / "entry_points.txt").write_text(f"[castguard.runners]\n{lines}\n")
    registered.cache_clear()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "traits_plugins", raising=False)
    yield
    registered.cache_clear()


def _session(tmp_path: Path) -> AccuracySession:
    harness_config = HarnessConfig(
        models=(str(save(mlp_model(), tmp_path / "mlp.onnx")),),
        goldens_dir=tmp_path / "goldens",
        report_dir=tmp_path / "report",
        cache_dir=tmp_path / "cache",
        sweep=SweepSpec(precisions=("fp16",), exclusions=SweepSpec().exclusions[:1], keep_io_types=(True,)),
    )
    session = AccuracySession.open(harness_config, bundled_dir=tmp_path / "none")
    assert session.check_fp32_golden("mlp").status == "fail"  # written now
    return session


def _started(session: AccuracySession, runner: str, precision: str = "fp16") -> CaseRun:
    run = session.start_case(Case("mlp", SweepPoint(precision=precision, runner=runner, keep_io_types=True)))
    assert run.stop is None and run.ctx is not None
    return run


def _env(session: AccuracySession) -> CaseEnv:
    return CaseEnv(settings=session.settings, cache=session.cache, same=session.same_models)


def test_every_builtin_declares_its_traits_and_a_plugin_reads_the_same_way(plugins: None) -> None:
    assert runner_traits("emulate").computes_exact_plan and runner_traits("reference").computes_exact_plan
    assert runner_traits("ort").takes_providers and runner_traits("ort").cpu_precisions == ("fp16",)
    assert runner_traits("trt").deploys_to == "tensorrt" and runner_traits("ort-cuda").reports_cpu_placement
    assert runner_traits("trt").speed.when == "always" and runner_traits("emulate").speed.when == "never"
    assert runner_traits("exact").computes_exact_plan and not runner_traits("plain").computes_exact_plan


def test_computes_exact_plan_reuses_a_same_plan_result_like_emulate(plugins: None, tmp_path: Path) -> None:
    session = _session(tmp_path)
    env = _env(session)
    for runner, reused in (("exact", True), ("emulate", True), ("plain", False)):
        first = session.check_low_precision(Case("mlp", SweepPoint(runner=runner, keep_io_types=True))).record
        assert first is not None and first.status == "pass" and first.reused_from is None
        other = convert_step(_started(session, runner), env)
        assert other.converted is not None
        model = onnx.ModelProto()
        model.CopyFrom(other.converted.conversion.model)
        model.doc_string = "same plan, another graph"  # the graph digest changes, the precision plan does not
        conversion = replace(other.converted.conversion, model=model)
        found = find_duplicate(replace(other, converted=replace(other.converted, conversion=conversion)), env)
        assert found.duplicate is not None, runner
        if reused:
            assert found.stop is not None and found.stop.kind == "reused" and found.duplicate.kind == "plan"
            assert record(found).reuse_kind == "plan" and record(found).reused_from == first.case_id
        else:
            assert found.stop is None and found.duplicate.same_plan_as == first.case_id


def test_a_speed_claim_is_measured_like_a_gpu_runners(plugins: None, tmp_path: Path) -> None:
    session = _session(tmp_path)
    fast = session.check_low_precision(Case("mlp", SweepPoint(runner="fast", keep_io_types=True))).record
    plain = session.check_low_precision(Case("mlp", SweepPoint(runner="plain", keep_io_types=True))).record
    assert fast is not None and fast.latency_ms is not None and fast.speedup is not None and fast.speed_note == ""
    assert plain is not None and plain.latency_ms is None and "no speed is claimed" in plain.speed_note


def test_takes_providers_gets_the_runs_providers_and_its_cpu_precisions(plugins: None, tmp_path: Path) -> None:
    session = _session(tmp_path)
    fp16 = session.check_low_precision(Case("mlp", SweepPoint(runner="providers", keep_io_types=True)))
    providers_cls = sys.modules["traits_plugins"].Providers
    assert fp16.status == "pass" and providers_cls.seen and set(providers_cls.seen) == {("CPUExecutionProvider",)}
    bf16 = session.check_low_precision(Case("mlp", SweepPoint(runner="providers", precision="bf16")))
    assert bf16.status == "skip" and "no bf16 kernels" in bf16.message and bf16.record is not None
    assert bf16.record.stopped == "cannot_run" and bf16.record.runner == "providers[CPUExecutionProvider]"
    plain = session.check_low_precision(Case("mlp", SweepPoint(runner="plain", precision="bf16")))
    assert plain.status == "pass"  # no providers taken, no CPU precision limit


def test_a_deployment_target_fails_a_model_that_does_not_build_there(plugins: None, tmp_path: Path) -> None:
    session = _session(tmp_path)
    broken = BuildChecked(build=TrtBuild(backend="TensorRT 10", outcome="build", build_error="no kernel"))
    for runner, status in (("deploys", "fail"), ("trt", "fail"), ("plain", "pass")):
        run = run_steps(_started(session, "plain"), _env(session), SWEEP_STEPS)
        run = replace(run, traits=runner_traits(runner), built=broken)
        verdict = decide(run)
        assert verdict.status == status, runner
        assert ("converted for TensorRT" in verdict.message) is (status == "fail")


def test_cpu_placement_is_asked_of_a_runner_that_reports_it(plugins: None, tmp_path: Path) -> None:
    session = _session(tmp_path)
    placed = session.check_low_precision(Case("mlp", SweepPoint(runner="placed", keep_io_types=True))).record
    plain = session.check_low_precision(Case("mlp", SweepPoint(runner="plain", keep_io_types=True))).record
    assert placed is not None and placed.cpu_float_nodes == ("mm1 (Gemm)",)
    assert plain is not None and plain.cpu_float_nodes == ()


def test_the_diagnosis_runs_where_the_runner_runs(plugins: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``device_providers``: the diagnosis's side-by-side graph goes to the runner's device (ort-cuda: CUDA, with
    TF32 off so the FP32 half stays FP32), the CPU after it for nodes the device lacks; a runner without a device
    keeps it on the CPU; ``ort`` given CUDA takes it there too."""
    cpu, cuda = "CPUExecutionProvider", "CUDAExecutionProvider"
    assert runner_traits("ort-cuda").work_providers(()) == (cuda, cpu)
    assert runner_traits("ort").work_providers((cuda, cpu)) == (cuda, cpu)
    assert runner_traits("ort").work_providers((cpu,)) == (cpu,) == runner_traits("emulate").work_providers(())
    assert runner_traits("device").work_providers(()) == ("XpuExecutionProvider", cpu)
    assert runner_traits("plain").work_providers((cuda,)) == (cpu,)  # providers it does not take

    import harness.diagnose.profile as profile

    seen: list[dict[str, object]] = []
    real = profile.create_session

    def recording(model: onnx.ModelProto, **kwargs: object) -> object:
        seen.append(kwargs)
        return real(model, **{**kwargs, "providers": (cpu,)})  # type: ignore[arg-type]  # no GPU here

    monkeypatch.setattr(profile, "create_session", recording)
    reference = mlp_model()
    converted = convert_to_mixed_precision(reference, "fp16", keep_io_types=True)
    feeds = [{"x": np.ones((1, 8), np.float32)}]
    pair = ModelPair(reference, converted, feeds, precision="fp16", policy=TolerancePolicy(), providers=(cuda, cpu))
    rows = profile.divergence_profile(pair).rows
    assert rows and seen and seen[0]["providers"] == (cuda, cpu)
    assert seen[0]["provider_options"] == {cuda: {"use_tf32": "0"}}


def test_a_cuda_reference_run_keeps_tf32_off() -> None:
    """``castguard convert --providers cuda:N``: the FP32 reference run's MatMuls stay FP32 (TF32 keeps 10 bits)."""
    from harness.convert.refproviders import provider_list

    cuda = "CUDAExecutionProvider"
    assert provider_list(["cuda:1"], []) == [(cuda, {"device_id": "1", "use_tf32": "0"})]
    assert provider_list(["cpu"], []) == [("CPUExecutionProvider", {})]
