"""The TensorRT runner's run path through its seam: a fake :class:`LiveEngine` (engine, context, device).

Nothing can run a TensorRT engine here (no GPU; TensorRT-RTX 1.7.1 does not run on the lent H100's compute
capability 9.0), so the code between the feeds and ``execute_async_v3`` (types, bf16 bits, shapes, buffers, device
copies, the inspector, the release order) runs against a fake engine that computes ``y = x + 1`` in its I/O type on
"device" memory held in a dict. The compute-capability skip and the validity check are tested as functions.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.core.errors import RunnerError, RunnerUnavailable
from harness.runners.tensorrt.engine import _check_validity, rtx_targets, unsupported_gpu
from harness.runners.tensorrt.library import TrtModule
from harness.runners.tensorrt.runner import LiveEngine, TrtRunner

RTX_CC = ["NONE", "CURRENT", "SM75", "SM80", "SM86", "SM89", "SM120", "SM121"]  # ComputeCapability in 1.7.1


def _add_one(elem: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"], name="add")],
        "add_one",
        [helper.make_tensor_value_info("x", elem, ["n", 4])],
        [helper.make_tensor_value_info("y", elem, ["n", 4])],
        initializer=[helper.make_tensor("one", elem, [], [1.0])],
    )
    return helper.make_model_gen_version(graph, opset_imports=[helper.make_opsetid("", 22)])


class FakeDevice:
    """Device memory as byte buffers keyed by address; every call is logged."""

    name, compute_capability, stream = "Fake GPU", (8, 9), 77

    def __init__(self) -> None:
        self.memory: dict[int, bytearray] = {}
        self.calls: list[str] = []
        self.next_address = 4096

    def host(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.empty(shape, dtype)

    def alloc(self, nbytes: int) -> int:
        address, self.next_address = self.next_address, self.next_address + 4096
        self.memory[address] = bytearray(nbytes)
        self.calls.append(f"alloc {nbytes}")
        return address

    def free(self, address: int) -> None:
        del self.memory[address]
        self.calls.append("free")

    def upload(self, address: int, host: np.ndarray) -> None:
        self.memory[address][: host.nbytes] = host.tobytes()
        self.calls.append("upload")

    def download(self, host: np.ndarray, address: int) -> None:
        host[...] = np.frombuffer(bytes(self.memory[address][: host.nbytes]), host.dtype).reshape(host.shape)
        self.calls.append("download")

    def synchronize(self) -> None:
        self.calls.append("sync")

    def close(self) -> None:
        self.calls.append("close")


class FakeContext:
    """``y = x + 1`` on the device, in the engine's I/O type (bf16 as its uint16 bits)."""

    def __init__(self, device: FakeDevice, dtype: str, profile: tuple[int, int]) -> None:
        self.device, self.dtype, self.profile = device, dtype, profile
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.addresses: dict[str, int] = {}

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        self.shapes = {"x": tuple(shape), "y": tuple(shape)}
        return self.profile[0] <= shape[0] <= self.profile[1]

    def infer_shapes(self) -> list[str]:
        return []

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[name]

    def set_tensor_address(self, name: str, address: int) -> None:
        self.addresses[name] = address

    def execute_async_v3(self, stream: int) -> bool:
        assert stream == self.device.stream
        host = {"FLOAT": np.float32, "HALF": np.float16, "BF16": np.uint16}[self.dtype]
        size = int(np.prod(self.shapes["x"]))
        x = np.frombuffer(bytes(self.device.memory[self.addresses["x"]][: size * np.dtype(host).itemsize]), host)
        value = x.view(ml_dtypes.bfloat16).astype(np.float32) if self.dtype == "BF16" else x.astype(np.float32)
        y = (value + 1).astype(ml_dtypes.bfloat16).view(np.uint16) if self.dtype == "BF16" else (value + 1).astype(host)
        self.device.memory[self.addresses["y"]][: y.nbytes] = y.tobytes()
        self.device.calls.append("execute")
        return True


INSPECTOR = json.dumps(
    {
        "Layers": [
            {
                "Name": "add",
                "LayerType": "ElementWise",
                "Inputs": [{"Name": "x", "Dimensions": [1, 4], "Format/Datatype": "Half"}],
                "Outputs": [{"Name": "y", "Dimensions": [1, 4], "Format/Datatype": "Half"}],
                "Metadata": "[ONNX Layer: add]",
            }
        ],
        "Bindings": ["x", "y"],
    }
)


def _opener(dtype: str, *, profile: tuple[int, int] = (1, 8)) -> Any:
    def open_engine(runner: TrtRunner) -> LiveEngine:
        device = FakeDevice()
        engine = SimpleNamespace(get_tensor_profile_shape=lambda name, index: [(1, 4), (1, 4), (8, 4)])
        return LiveEngine(
            engine=engine,
            context=FakeContext(device, dtype, profile),
            device=device,
            io_dtypes={"x": dtype, "y": dtype},
            inputs=("x",),
            runner_name="trt-rtx-1.7",
            backend="TensorRT-RTX 1.7.1.116",
            plan=b"plan",
            inspect=lambda: INSPECTOR,
            release=lambda: device.calls.append("release"),
        )

    return open_engine


@pytest.mark.parametrize(
    ("elem", "dtype", "np_type"),
    [
        (TensorProto.FLOAT, "FLOAT", np.float32),
        (TensorProto.FLOAT16, "HALF", np.float16),
        (TensorProto.BFLOAT16, "BF16", ml_dtypes.bfloat16),
    ],
)
def test_the_run_path_feeds_runs_and_reads_back_in_the_engines_types(elem: int, dtype: str, np_type: Any) -> None:
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4).astype(np_type)
    result = TrtRunner(_add_one(elem), open_engine=_opener(dtype)).run([{"x": x}])
    (y,) = (o["y"] for o in result.outputs)
    assert result.runner == "trt-rtx-1.7" and result.rounds_low_precision and y.dtype == np.dtype(np_type)
    np.testing.assert_array_equal(y, (x.astype(np.float32) + 1).astype(np_type))


def test_buffers_are_reused_for_the_same_shape_and_freed_once_after_the_engine() -> None:
    runner = TrtRunner(_add_one(TensorProto.FLOAT16), open_engine=_opener("HALF"))
    with runner:
        device = runner._live.device if runner._live is not None else None
        assert isinstance(device, FakeDevice) and runner.backend == "TensorRT-RTX 1.7.1.116" and runner.plan == b"plan"
        for _ in range(2):
            runner.infer({"x": np.ones((1, 4), np.float16)})
        runner.infer({"x": np.ones((3, 4), np.float16)})  # a new shape: new buffers
    assert device.calls.count("alloc 8") == 2 and device.calls.count("alloc 24") == 2
    assert device.calls[-4:] == ["release", "free", "free", "close"] and device.memory == {}  # engine first
    assert device.calls.count("execute") == 3 and runner._live is None
    assert runner.precision_report is not None and runner.check_precisions() == []


def test_a_feed_outside_the_profile_is_an_error_naming_the_profile() -> None:
    runner = TrtRunner(_add_one(TensorProto.FLOAT16), open_engine=_opener("HALF", profile=(1, 2)))
    with pytest.raises(RunnerError, match=r"input 'x' shape \(4, 4\) is outside the engine's optimization profile"):
        runner.run([{"x": np.ones((4, 4), np.float16)}])
    assert not runner.is_active and runner._live is None  # run() released the engine


def test_rtx_default_targets_come_from_the_compute_capability_enum() -> None:
    assert rtx_targets(RTX_CC) == ((8, 0), (8, 6), (8, 9), (12, 0), (12, 1))


def test_the_unsupported_gpu_skip_names_the_gpu_its_capability_and_the_list() -> None:
    text = unsupported_gpu(
        "TensorRT-RTX 1.7.1.116", gpu="NVIDIA H100 80GB HBM3", capability=(9, 0), supported=rtx_targets(RTX_CC)
    )
    assert text == (
        "TensorRT-RTX 1.7.1.116 cannot run its engine on this GPU: NVIDIA H100 80GB HBM3 (compute "
        "capability 9.0); its engines run on compute capability 8.0, 8.6, 8.9, 12.0, 12.1. The build "
        "itself works on any machine: the TensorRT build check covers it"
    )


def _fake_trt(validity: str, diagnostics: int) -> tuple[TrtModule, Any]:
    members = {"UNSUPPORTED_CC": 1 << 1, "VERSION_MISMATCH": 1 << 0, "OLD_CUDA_DRIVER": 1 << 2}
    module = SimpleNamespace(
        EngineInvalidityDiagnostics=SimpleNamespace(__members__=members),
        ComputeCapability=SimpleNamespace(__members__={name: i for i, name in enumerate(RTX_CC)}),
    )
    runtime = SimpleNamespace(get_engine_validity=lambda plan: (f"EngineValidity.{validity}", diagnostics))
    return TrtModule(module=module, name="tensorrt_rtx_bindings", version="1.7.1.116"), runtime  # type: ignore[arg-type]


def test_engine_validity_turns_an_unsupported_gpu_into_a_skip_before_deserializing() -> None:
    trt_module, runtime = _fake_trt("INVALID", 1 << 1)
    hopper = FakeDevice()
    hopper.name, hopper.compute_capability = "NVIDIA H200", (9, 0)
    logger = SimpleNamespace(lines=[])
    with pytest.raises(
        RunnerUnavailable,
        match=r"on this GPU: NVIDIA H200 \(compute capability 9\.0\); its engines "
        r"run on compute capability 8\.0, 8\.6, 8\.9, 12\.0, 12\.1",
    ):
        _check_validity(trt_module, runtime, b"plan", hopper, logger)
    trt_module, runtime = _fake_trt("INVALID", 1 << 2)
    with pytest.raises(RunnerUnavailable, match=r"says its engine is not valid on this machine \(OLD_CUDA_DRIVER\)"):
        _check_validity(trt_module, runtime, b"plan", FakeDevice(), logger)
    trt_module, runtime = _fake_trt("VALID", 0)
    assert _check_validity(trt_module, runtime, b"plan", hopper, logger) is None
