"""GPU memory for the TensorRT runner: cuda-python (``cuda.bindings``, wheels on PyPI) or pycuda (source only).

:class:`Device` is the small interface :class:`harness.runners.tensorrt.runner.TrtRunner` runs through: allocate, copy in and
out on one stream, synchronize, and say which GPU it is (name, compute capability) so that an engine the GPU
cannot run becomes a skip naming both. :func:`open_device` takes cuda-python when installed
(``pip install "castguard[trt-run]"``), else pycuda; both use the device's primary context, the one TensorRT,
onnxruntime-gpu and torch share. Unit tests pass a fake device instead (tests/unit/runners/test_trt_run_path.py).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import numpy as np

from harness.core.errors import RunnerError, RunnerUnavailable

RUN_INSTALL = 'pip install "castguard[trt-run]" (cuda-python), or pycuda'


class Device(Protocol):
    """One CUDA device and one stream on it."""

    name: str
    compute_capability: tuple[int, int]
    stream: int  # the handle execute_async_v3 takes

    def host(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray: ...
    def alloc(self, nbytes: int) -> int: ...
    def free(self, address: int) -> None: ...
    def upload(self, address: int, host: np.ndarray) -> None: ...
    def download(self, host: np.ndarray, address: int) -> None: ...
    def synchronize(self) -> None: ...
    def close(self) -> None: ...


class CudaPythonDevice:
    """:class:`Device` through cuda-python's runtime API (``cuda.bindings.runtime``; pageable host buffers)."""

    def __init__(self, cudart: Any) -> None:
        self._rt = cudart
        self._check(cudart.cudaFree(0), "initialising CUDA", unavailable=True)  # creates the primary context
        device = self._check(cudart.cudaGetDevice(), "cudaGetDevice", unavailable=True)
        props = self._check(cudart.cudaGetDeviceProperties(device), "cudaGetDeviceProperties", unavailable=True)
        raw = props.name
        self.name = (raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)).rstrip("\x00").strip()
        self.compute_capability = (int(props.major), int(props.minor))
        self._stream = self._check(cudart.cudaStreamCreate(), "cudaStreamCreate")
        self.stream = int(self._stream)

    def _check(self, result: Any, what: str, *, unavailable: bool = False) -> Any:
        err, *values = result if isinstance(result, tuple) else (result,)
        if err != self._rt.cudaError_t.cudaSuccess:
            text = self._rt.cudaGetErrorString(err)[1]
            message = f"{what} failed: {text.decode() if isinstance(text, bytes) else text}"
            raise (
                RunnerUnavailable(f"no usable CUDA device for TensorRT: {message}")
                if unavailable
                else RunnerError(f"trt: {message}")
            )
        return values[0] if len(values) == 1 else tuple(values)

    def host(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.empty(shape, dtype)

    def alloc(self, nbytes: int) -> int:
        return int(self._check(self._rt.cudaMalloc(nbytes), "cudaMalloc"))

    def free(self, address: int) -> None:
        self._check(self._rt.cudaFree(address), "cudaFree")

    def upload(self, address: int, host: np.ndarray) -> None:
        kind = self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._check(
            self._rt.cudaMemcpyAsync(address, host.ctypes.data, host.nbytes, kind, self._stream),
            "cudaMemcpyAsync (host to device)",
        )

    def download(self, host: np.ndarray, address: int) -> None:
        kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._check(
            self._rt.cudaMemcpyAsync(host.ctypes.data, address, host.nbytes, kind, self._stream),
            "cudaMemcpyAsync (device to host)",
        )

    def synchronize(self) -> None:
        self._check(self._rt.cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")

    def close(self) -> None:
        self._check(self._rt.cudaStreamDestroy(self._stream), "cudaStreamDestroy")


class PycudaDevice:
    """:class:`Device` through pycuda (``pycuda.autoprimaryctx``; page-locked host buffers)."""

    def __init__(self, cuda: Any) -> None:
        self._cuda = cuda
        try:
            importlib.import_module("pycuda.autoprimaryctx")
        except cuda.Error as err:
            raise RunnerUnavailable(f"no usable CUDA device for TensorRT: {err}") from err
        device = cuda.Context.get_device()
        self.name = str(device.name())
        major, minor = device.compute_capability()
        self.compute_capability = (int(major), int(minor))
        self._stream = cuda.Stream()
        self.stream = int(self._stream.handle)
        self._held: dict[int, Any] = {}

    def host(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.asarray(self._cuda.pagelocked_empty(shape, dtype))

    def alloc(self, nbytes: int) -> int:
        allocation = self._cuda.mem_alloc(nbytes)
        self._held[int(allocation)] = allocation
        return int(allocation)

    def free(self, address: int) -> None:
        self._held.pop(address).free()

    def upload(self, address: int, host: np.ndarray) -> None:
        self._cuda.memcpy_htod_async(address, host, self._stream)

    def download(self, host: np.ndarray, address: int) -> None:
        self._cuda.memcpy_dtoh_async(host, address, self._stream)

    def synchronize(self) -> None:
        self._stream.synchronize()

    def close(self) -> None:
        for address in list(self._held):
            self.free(address)


def open_device() -> Device:
    """cuda-python's device when installed, else pycuda's; RunnerUnavailable when neither is, or no GPU answers."""
    for module, make in (("cuda.bindings.runtime", CudaPythonDevice), ("pycuda.driver", PycudaDevice)):
        try:
            api = importlib.import_module(module)
        except ModuleNotFoundError:
            continue
        except (ImportError, OSError) as err:  # installed, but libcuda or its own library is missing
            raise RunnerUnavailable(f"{module} is installed but cannot be loaded: {err}") from err
        device: Device = make(api)
        return device
    raise RunnerUnavailable(f"no CUDA library for device memory: {RUN_INSTALL}")
