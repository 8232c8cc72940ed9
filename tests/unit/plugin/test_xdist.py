"""GPU pinning of xdist workers, with fake environments (no GPU is needed or used)."""

from __future__ import annotations

import pytest

from harness.plugin.xdist import pin_worker, visible_gpus, worker_gpu


@pytest.mark.parametrize(
    ("env", "detected", "expected"),
    [
        ({}, 0, ()),
        ({}, 4, ("0", "1", "2", "3")),
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, 8, ("2", "3")),
        ({"CUDA_VISIBLE_DEVICES": " 1 , 0 "}, 0, ("1", "0")),
        ({"CUDA_VISIBLE_DEVICES": "GPU-aa11,GPU-bb22"}, 0, ("GPU-aa11", "GPU-bb22")),
        ({"CUDA_VISIBLE_DEVICES": ""}, 8, ()),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, 8, ()),
        ({"CUDA_VISIBLE_DEVICES": "0,-1,1"}, 8, ("0",)),  # CUDA stops at the first invalid entry
    ],
)
def test_visible_gpus(env: dict[str, str], detected: int, expected: tuple[str, ...]) -> None:
    assert visible_gpus(env, detected=detected) == expected


@pytest.mark.parametrize(
    ("worker", "env", "detected", "expected"),
    [
        ("gw0", {}, 4, "0"),
        ("gw3", {}, 4, "3"),
        ("gw5", {}, 4, "1"),  # more workers than GPUs: round robin
        ("gw1", {"CUDA_VISIBLE_DEVICES": "4,6"}, 8, "6"),
        ("gw2", {"CUDA_VISIBLE_DEVICES": "4,6"}, 8, "4"),
        ("gw0", {"CUDA_VISIBLE_DEVICES": "3"}, 8, None),  # one GPU: nothing to spread
        ("gw1", {}, 1, None),
        ("gw1", {}, 0, None),  # CPU only (this machine)
        ("master", {}, 4, None),  # not an xdist worker
        (None, {}, 4, None),
        ("gwx", {}, 4, None),
    ],
)
def test_worker_gpu(worker: str | None, env: dict[str, str], detected: int, expected: str | None) -> None:
    assert worker_gpu(worker, env, detected=detected) == expected


def test_pin_worker_on_this_machine_leaves_a_single_or_no_gpu_alone() -> None:
    assert pin_worker(None, {}) is None
    assert pin_worker("gw1", {"CUDA_VISIBLE_DEVICES": "0"}) is None
    assert pin_worker("gw1", {"CUDA_VISIBLE_DEVICES": "0,1"}) == "1"
