"""onnxruntime runner (any execution provider; CPU by default). It produces the FP32 goldens.

ORT's CPU provider computes most fp16 ops in fp32 and merges adjacent fp16 ops into one fp32 island
(``docs/runtime-facts.md`` §1.1), so with the CPU provider ``rounds_low_precision`` is False:
its fp16 results are not a low-precision oracle. GPU providers (CUDA, TensorRT, ...) do round.
bf16 tensors cross the boundary as OrtValues of uint16 bits, both ways.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.core.dtypes import BFLOAT16, bits_to_bf16
from harness.core.errors import RunnerError, RunnerUnavailable
from harness.core.providers import CPU as CPU  # re-exported: callers of this runner read the name here
from harness.core.providers import CUDA, DIRECTML, TENSORRT, on_host
from harness.data.feeds import Feed
from harness.runners.base import Runner
from harness.runners.ortsource import host_source, session_scratch, session_source, to_ort_value

_NON_ROUNDING_PROVIDERS = frozenset({CPU})


def is_ort_error(err: BaseException) -> bool:
    """An error onnxruntime's binding raised (``Fail``, ``InvalidArgument``, ``NotImplemented``...), told by the
    class's module, so that no private onnxruntime name is imported; RuntimeError counts too."""
    return type(err).__module__.startswith("onnxruntime") or isinstance(err, RuntimeError)


def is_not_implemented(err: BaseException) -> bool:
    """onnxruntime's "no kernel for this node" errors: NOT_IMPLEMENTED, or (CUDA with the CPU fallback on) a node
    that no provider placed: "Provider type for MaxPool node with name 'Pooling66' is not set" (no bf16 MaxPool
    kernel on CUDA or on the CPU)."""
    if not is_ort_error(err):
        return False
    return type(err).__name__ == "NotImplemented" or ("Provider type for" in str(err) and "is not set" in str(err))


def create_session(
    model: onnx.ModelProto | Path,
    *,
    providers: Sequence[str],
    runner: str,
    model_dir: Path | None = None,
    cpu_fallback: bool = True,
    spinning: bool = True,
    as_given: bool = False,
    provider_options: Mapping[str, Mapping[str, str]] | None = None,
    profile_prefix: str | None = None,
) -> Any:
    """An ``InferenceSession`` for ``model`` (see :func:`session_source`; a path: a file :func:`host_source` wrote,
        loaded as it is); RunnerUnavailable for missing
        providers or kernels. With ``cpu_fallback=False`` a node without a kernel on the named providers fails the
        load instead of moving to the CPU EP. With ``spinning=False`` the session's idle intra-op threads sleep instead
        of spinning: the same threads and the same work split (so the same values), but an oracle that runs one
        small model per case stops burning the cores that the next session's creation needs (bert_tiny: 135 ms ->
        68 ms to create its emulation session on the 2-core workplace; benchmarks/bench_pipeline.py). With
        ``as_given`` the graph runs as given: no graph optimizations, nodes in the given order where the graph allows
        (priority-based order): for the diagnosis's side-by-side graph, whose every tensor is read by comparison nodes
        placed after its producers (so no fusion could apply, and onnxruntime's default order would keep them all
        alive), and whose size makes the optimizers slow; and without the static memory-reuse plan, whose planning grows
        about quadratically with the nodes on a GPU provider (the 8x1024 decoder's side-by-side graph, 11k nodes, on
        CUDA: 22 s to create, 4.7 s without it; the same run time and GPU memory, since the arena still frees each tensor
        after its last reader; on the CPU the same peak RSS); and without prepacked weights (each MatMul packs its weights
    as it runs, once for a session run once). ``provider_options``: per provider named, its options.
        ``profile_prefix``: the session profiles its runs into files of that prefix until ``end_profiling()``."""
    import onnxruntime as ort

    missing = [p for p in providers if p not in ort.get_available_providers()]
    if missing:
        raise RunnerUnavailable(
            f"{runner}: onnxruntime here has no {', '.join(missing)} "
            f"(available: {', '.join(ort.get_available_providers())}); "
            "for CUDA: pip uninstall -y onnxruntime && pip install onnxruntime-gpu"
        )
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not cpu_fallback:
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if as_given:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
        options.enable_mem_reuse = False
        if on_host(providers):  # run once: a packed copy of every weight would only add host memory (a 6x384
            options.add_session_config_entry("session.disable_prepacking", "1")  # decoder's profile: 735 -> 687 MB)
    keep: list[Any] = []  # the weights handed over as arrays: alive as long as the session
    try:
        with session_scratch() as tmp:
            if isinstance(model, onnx.ModelProto) and on_host(providers):
                model = host_source(model, Path(tmp))  # the weights once: onnxruntime copies arrays handed over
            session = ort.InferenceSession(
                str(model)
                if isinstance(model, Path)
                else session_source(model, model_dir=model_dir, scratch=Path(tmp), options=options, keep=keep),
                sess_options=options,
                providers=list(providers),
                provider_options=[dict((provider_options or {}).get(p, {})) for p in providers],
            )
            session.castguard_weights = keep
            return session
    except Exception as err:  # noqa: BLE001 - onnxruntime's error classes live in a private module
        if is_not_implemented(err):
            raise RunnerUnavailable(
                f"{runner}: onnxruntime has no kernel for this model here ({err}); "
                "use --runner emulate, which runs fp16/bf16 models on CPU, or convert with "
                "--target ort-cuda, which keeps such ops FP32"
            ) from err
        if is_ort_error(err):
            raise RunnerError(f"{runner}: onnxruntime could not load the model: {err}") from err
        raise


def _from_ort_value(value: Any, *, runner: str, name: str) -> np.ndarray:
    if value.data_type() != "tensor(bfloat16)":
        arr: np.ndarray = value.numpy()
        return arr
    if value.device_name().lower() != "cpu":
        raise RunnerError(f"{runner}: bf16 output {name!r} is on {value.device_name()}, expected cpu")
    bits = np.empty(value.shape(), dtype=np.uint16)
    if bits.nbytes != value.tensor_size_in_bytes():
        raise RunnerError(
            f"{runner}: bf16 output {name!r} has {value.tensor_size_in_bytes()} bytes, expected {bits.nbytes}"
        )
    if bits.nbytes:
        ctypes.memmove(bits.ctypes.data, value.data_ptr(), bits.nbytes)
    return bits_to_bf16(bits)


def run_session(session: Any, feed: Feed, *, runner: str) -> dict[str, np.ndarray]:
    """Run one feed; outputs by name, bf16 outputs as ml_dtypes.bfloat16.

    The outputs are onnxruntime's own buffers (no copy), and each holds the session's CPU arena alive: the run
    shrinks the arena as it ends (``memory.enable_memory_arena_shrinkage``), so that what the outputs keep is
    themselves, not every intermediate of the run (a 4x256 decoder with a 32000-token vocabulary: 366 MB more
    held through the judge and the diagnosis, its failing case's peak 1.76 GB)."""
    import onnxruntime as ort

    names = [o.name for o in session.get_outputs()]
    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    try:
        values = session.run_with_ort_values(names, {k: to_ort_value(v) for k, v in feed.items()}, options)
    except Exception as err:  # noqa: BLE001 - see is_ort_error
        if is_ort_error(err):
            raise RunnerError(f"{runner}: onnxruntime failed while running: {err}") from err
        raise
    return {name: _from_ort_value(value, runner=runner, name=name) for name, value in zip(names, values)}


DEVICES = {CPU: "cpu", CUDA: "cuda", TENSORRT: "cuda", DIRECTML: "dml"}
"""The OrtValue device of each execution provider's memory (IO binding)."""


def bound_call(session: Any, feed: Feed, *, device: str, runner: str) -> Callable[[], object]:
    """``session`` run through IO binding: ``feed`` copied to ``device`` once, here; every call runs the model with
    the inputs in place and leaves its outputs on ``device`` (a bfloat16 input stays in host memory: numpy has
    no such type for OrtValue to copy from, so onnxruntime copies that one at each call)."""
    import onnxruntime as ort

    binding = session.io_binding()
    try:
        for name, arr in feed.items():
            value = (
                to_ort_value(arr)
                if arr.dtype == BFLOAT16
                else ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr), device, 0)
            )
            binding.bind_ortvalue_input(name, value)
        for out in session.get_outputs():
            binding.bind_output(out.name, device, 0)
    except Exception as err:  # noqa: BLE001 - see is_ort_error
        if is_ort_error(err):
            raise RunnerError(f"{runner}: onnxruntime could not bind the inputs on {device}: {err}") from err
        raise

    def call() -> object:
        try:
            session.run_with_iobinding(binding)
        except Exception as err:  # noqa: BLE001 - see is_ort_error
            if is_ort_error(err):
                raise RunnerError(f"{runner}: onnxruntime failed while running with IO binding: {err}") from err
            raise
        return binding

    return call


class OrtRunner(Runner):
    """``ort[<provider>]``: onnxruntime with the given providers (first one named)."""

    def __init__(
        self, model: onnx.ModelProto, *, model_dir: Path | None = None, providers: Sequence[str] = (CPU,)
    ) -> None:
        if not providers:
            raise ValueError("OrtRunner needs at least one execution provider")
        super().__init__(
            model,
            name=f"ort[{providers[0]}]",
            rounds_low_precision=providers[0] not in _NON_ROUNDING_PROVIDERS,
            model_dir=model_dir,
        )
        self.providers = tuple(providers)
        self._session: Any = None

    def activate_impl(self) -> None:
        self._session = create_session(self.model, providers=self.providers, runner=self.name, model_dir=self.model_dir)

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        return run_session(self._session, feed, runner=self.name)

    def device_call(self, feed: Feed) -> Callable[[], object] | None:
        device = DEVICES.get(self.providers[0])
        return None if device is None else bound_call(self._session, feed, device=device, runner=self.name)

    def deactivate_impl(self) -> None:
        self._session = None
