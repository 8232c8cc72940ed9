"""Latency measurement (fake clock), speed claims, and the ort-cuda runner's CPU-only paths."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from harness.core.errors import RunnerUnavailable
from harness.runners import make_runner
from harness.runners.ort_cuda import cpu_placed_nodes, float_fallbacks
from harness.runners.timing import TimingConfig, interleaved, speed_claim, speedup


class FakeClock:
    """Each call of a model advances time by that model's cost; the clock reads the accumulated time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def cost(self, seconds: float) -> object:
        def call() -> None:
            self.now += seconds

        return call


def test_interleaved_takes_the_median_of_round_medians_with_a_fake_clock() -> None:
    clock = FakeClock()
    slow_rounds = itertools.cycle([0.004, 0.004, 0.010])  # one noisy repeat in three
    calls = {"fp32": clock.cost(0.002), "fp16": lambda: setattr(clock, "now", clock.now + next(slow_rounds))}
    result = interleaved(calls, config=TimingConfig(warmup=2, repeats=3, rounds=4, clock=clock))
    assert result["fp32"].median_ms == pytest.approx(2.0)
    assert result["fp32"].spread_ms == pytest.approx(0.0)
    assert result["fp16"].median_ms == pytest.approx(4.0)
    assert result["fp32"].samples == 12
    assert speedup(result["fp32"].median_ms, result["fp16"].median_ms) == pytest.approx(0.5)


def test_interleaving_runs_every_model_in_every_round() -> None:
    order: list[str] = []
    calls = {name: (lambda n=name: order.append(n)) for name in ("a", "b")}
    interleaved(calls, config=TimingConfig(warmup=0, repeats=2, rounds=2, clock=FakeClock()))
    assert order == ["a", "a", "b", "b", "a", "a", "b", "b"]


def test_a_slow_model_is_timed_within_the_budget_and_a_fast_one_fully() -> None:
    """Deploy shapes: 25 ms a call, 2 models -> 5 rounds x 20 repeats would be 5 s; the 1 s budget keeps 4
    repeats a round (measured from the warm-up); a 1 ms model keeps all 20; never fewer than 3."""
    clock = FakeClock()
    slow = interleaved(
        {"fp32": clock.cost(0.025), "fp16": clock.cost(0.025)}, config=TimingConfig(warmup=1, clock=clock)
    )
    assert slow["fp32"].samples == 5 * 4 and slow["fp16"].median_ms == pytest.approx(25.0)
    fast = interleaved({"fp32": clock.cost(0.001)}, config=TimingConfig(warmup=1, clock=clock))
    assert fast["fp32"].samples == 5 * 20
    slowest = interleaved({"x": clock.cost(1.0)}, config=TimingConfig(warmup=1, clock=clock))
    assert slowest["x"].samples == 5 * 3
    unbounded = interleaved({"x": clock.cost(1.0)}, config=TimingConfig(warmup=1, clock=clock, budget_s=None))
    assert unbounded["x"].samples == 5 * 20


def test_timing_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="repeats >= 1"):
        TimingConfig(repeats=0)


@pytest.mark.parametrize(
    ("runner", "providers", "claims"),
    [
        ("ort-cuda", (), True),
        ("trt", (), True),
        ("ort", ("CUDAExecutionProvider",), True),
        ("emulate", (), False),
        ("ort", (), False),
        ("ort", ("CPUExecutionProvider",), False),
        ("reference", (), False),
    ],
)
def test_only_gpu_runners_claim_speed(runner: str, providers: tuple[str, ...], claims: bool) -> None:
    reason = speed_claim(runner, providers)
    assert (reason == "") is claims
    if not claims:
        assert "no" in reason or "nothing" in reason


def test_speedup_is_none_when_a_latency_is_missing() -> None:
    assert speedup(None, 1.0) is None and speedup(1.0, None) is None and speedup(2.0, 0.0) is None


def _shape_and_float_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"), helper.make_node("Relu", ["x"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 3])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 3]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_cpu_placement_is_read_from_a_real_onnxruntime_profile(tmp_path: Path) -> None:
    """On this CPU machine every node runs on the CPU EP: the profile parser finds both, and only the float
    Relu counts as a float fallback (Shape is the shape arithmetic ORT always keeps on the CPU)."""
    import numpy as np

    model = _shape_and_float_model()
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "p")
    session = ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones((2, 3), np.float32)})
    profile = Path(session.end_profiling())
    assert json.loads(profile.read_text())
    nodes = cpu_placed_nodes(profile)
    assert ("relu", "Relu") in nodes and ("shape", "Shape") in nodes
    assert float_fallbacks(nodes, model) == ["relu (Relu)"]


def test_ort_cuda_without_onnxruntime_gpu_says_how_to_install_it() -> None:
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("onnxruntime-gpu is installed here")
    runner = make_runner("ort-cuda", _shape_and_float_model())
    with pytest.raises(RunnerUnavailable, match="pip install onnxruntime-gpu"):
        runner.activate()


def _fake_cuda(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """ort_cuda's sessions made on the CPU provider (which stands in for CUDA: every node lands on the CPU EP, as
    shape arithmetic does on a GPU, so a session with the fallback off fails as it does there); the kwargs of each
    session asked for."""
    import harness.runners.ort_cuda as ort_cuda

    made: list[dict[str, object]] = []
    real = ort_cuda.create_session

    def session(model: onnx.ModelProto, **kwargs: object) -> object:
        made.append(kwargs)
        if kwargs.get("cpu_fallback") is False:
            raise RuntimeError("fallback to CPU EP has been explicitly disabled by the user")
        return real(model, **{**kwargs, "providers": ("CPUExecutionProvider",)})  # type: ignore[arg-type]

    monkeypatch.setattr(ort_cuda, "require_cuda", lambda runner: None)
    monkeypatch.setattr(ort_cuda, "require_cuda_session", lambda session, runner: None)
    monkeypatch.setattr(ort_cuda, "create_session", session)
    return made


def test_ort_cuda_reads_the_placement_from_its_own_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model with a Shape node (whose consumers ORT puts on the CPU EP) loads with the fallback on at once; its
    session profiles its first run and the placement is read from it: no second session, later runs not
    profiled."""
    import numpy as np

    from harness.runners.ort_cuda import OrtCudaRunner, places_shape_math_on_cpu

    made = _fake_cuda(monkeypatch)
    model = _shape_and_float_model()
    assert places_shape_math_on_cpu(model)
    runner = OrtCudaRunner(model)
    feed = {"x": np.ones((2, 3), np.float32)}
    result = runner.run([feed, feed])
    assert len(result.outputs) == 2
    assert [k.get("profile_prefix") is not None for k in made] == [True]  # no load with the fallback off first
    assert runner.profile_placement(feed) == ["relu (Relu)"]
    assert ("shape", "Shape") in runner.cpu_nodes and len(made) == 1  # read from the first run, no new session


def test_ort_cuda_tries_the_fallback_off_first_without_shape_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a Shape or Size node the session is first made with the CPU fallback off; where onnxruntime still
    needs it (here: the CPU stand-in), the runner loads it with the fallback on and reads the placement."""
    import numpy as np

    from harness.runners.ort_cuda import OrtCudaRunner, places_shape_math_on_cpu

    made = _fake_cuda(monkeypatch)
    model = _shape_and_float_model()
    del model.graph.node[0]  # the Shape
    del model.graph.output[1]
    assert not places_shape_math_on_cpu(model)
    runner = OrtCudaRunner(model)
    feed = {"x": np.ones((2, 3), np.float32)}
    runner.run([feed])
    assert [(k.get("cpu_fallback"), k.get("profile_prefix") is not None) for k in made] == [
        (False, False),
        (None, True),
    ]
    assert runner.profile_placement(feed) == ["relu (Relu)"]
