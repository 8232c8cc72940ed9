"""harness.core.providers.on_host: what decides whether a run's memory is the host's (golden pages let go, no
prepacked copy of a run-once session's weights)."""

from __future__ import annotations

from harness.core.providers import CPU, CUDA, TENSORRT, on_host
from harness.runners.registry import runner_traits


def test_only_the_cpu_alone_is_the_host() -> None:
    assert on_host(()) and on_host((CPU,)) and on_host([CPU, CPU])
    assert not on_host((CUDA, CPU)) and not on_host((TENSORRT, CUDA, CPU))


def test_a_runner_s_work_is_on_the_host_exactly_when_it_runs_on_the_cpu() -> None:
    assert on_host(runner_traits("emulate").work_providers(()))
    assert on_host(runner_traits("ort").work_providers((CPU,)))
    assert not on_host(runner_traits("ort").work_providers((CUDA, CPU)))
    assert not on_host(runner_traits("ort-cuda").work_providers(()))
