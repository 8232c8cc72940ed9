"""``--runner ort-cuda``: onnxruntime-gpu's CUDA provider with CPU fallback made visible.

A session is first created with ``session.disable_cpu_ep_fallback``: when every node has a CUDA kernel it runs
like that. ORT always places shape arithmetic (int64 Shape/Gather/Concat...) on the CPU, so a model with such
nodes cannot load with the fallback off; the runner then loads it with the fallback on, profiles one run and
lists the nodes that ran on the CPU EP (:attr:`OrtCudaRunner.cpu_nodes`). A model with a Shape or Size node goes
straight to that second way (:func:`places_shape_math_on_cpu`). A float compute node among them means
the GPU numbers are partly CPU numbers; :attr:`OrtCudaRunner.fallback_note` says so in words.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import onnx

from harness.core.dtypes import FLOAT_TYPES
from harness.core.errors import RunnerUnavailable
from harness.core.ortenv import cuda_provider_problem, start_cuda_check
from harness.core.providers import CPU, CUDA
from harness.data.feeds import Feed
from harness.runners.base import Runner
from harness.runners.ort import bound_call, create_session, run_session

INSTALL_HINT = (
    "pip uninstall -y onnxruntime && pip install onnxruntime-gpu (a build matching your CUDA; "
    "the CPU and GPU packages cannot be installed together)"
)


def require_cuda(runner: str) -> None:
    """RunnerUnavailable with the install hint when onnxruntime here has no CUDA provider."""
    try:
        import onnxruntime as ort
    except ImportError as err:
        raise RunnerUnavailable(f"{runner}: onnxruntime is not installed; {INSTALL_HINT}") from err
    if CUDA not in ort.get_available_providers():
        raise RunnerUnavailable(
            f"{runner}: this onnxruntime ({ort.__version__}) has no {CUDA} "
            f"(available: {', '.join(ort.get_available_providers())}); {INSTALL_HINT}"
        )
    why = cuda_provider_problem()  # a CUDA session in a child process: the library onnxruntime could not load
    if why is not None:
        raise _unusable(runner, why)


def _unusable(runner: str, why: str) -> RunnerUnavailable:
    return RunnerUnavailable(
        f"{runner}: onnxruntime lists {CUDA} but cannot use it on this machine: {why}. "
        "It needs an NVIDIA GPU with its driver and the CUDA 13 and cuDNN 9 libraries "
        "(pip install 'onnxruntime-gpu[cuda,cudnn]' brings the libraries); castguard's "
        "emulate runner rounds fp16/bf16 on the CPU"
    )


def require_cuda_session(session: Any, runner: str) -> None:
    """RunnerUnavailable when ``session`` did not get the CUDA provider. onnxruntime-gpu lists CUDA as available
    even where its libraries are missing; creating the provider then fails, is only logged, and the session
    silently runs on the CPU, whose fp16 results are not rounded."""
    if CUDA not in session.get_providers():
        raise _unusable(runner, cuda_provider_problem() or "onnxruntime could not create it (see its log above)")


def cpu_placed_nodes(profile_path: Path) -> list[tuple[str, str]]:
    """(node name, op type) of every node an ORT profile shows running on the CPU EP."""
    events = json.loads(profile_path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for event in events:
        args = event.get("args", {}) if isinstance(event, dict) else {}
        if event.get("cat") == "Node" and args.get("provider") == CPU:
            name = str(event.get("name", "")).removesuffix("_kernel_time")
            found.setdefault(name, str(args.get("op_name", "")))
    return sorted(found.items())


def float_fallbacks(cpu_nodes: Sequence[tuple[str, str]], model: onnx.ModelProto) -> list[str]:
    """The CPU-placed nodes that do float work on more than one element: shape arithmetic (int64 Shape, Gather,
    Concat...) and scalars derived from shapes (e.g. the 1/sqrt(head_dim) of an attention export) are left out."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        inferred = model  # ops onnx cannot infer (another converter's output): the types the model declares
    types: dict[str, tuple[int, tuple[int | None, ...] | None]] = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tensor = vi.type.tensor_type
        dims = (
            tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
            if tensor.HasField("shape")
            else None
        )
        types[vi.name] = (tensor.elem_type, dims)
    by_name = {n.name: n for n in model.graph.node}
    result = []
    for name, op in cpu_nodes:
        node = by_name.get(name)
        if node is None:  # a node ORT made (layout reorders, fused kernels): count it
            result.append(f"{name} ({op})")
            continue
        for output in node.output:
            elem, dims = types.get(output, (0, None))
            scalar = dims is not None and all(d is not None for d in dims) and math.prod(d or 1 for d in dims) <= 1
            if elem in FLOAT_TYPES and not scalar:
                result.append(f"{name} ({op})")
                break
    return result


SHAPE_OPS = frozenset({"Shape", "Size"})


def places_shape_math_on_cpu(model: onnx.ModelProto) -> bool:
    """Whether onnxruntime will put some of ``model``'s nodes on the CPU EP: the consumers of a Shape or Size (the
    int64 shape arithmetic of every transformers export, and of castguard's own decoders) go there. Only a guess
    of which session to create first: a wrong True costs a profiled first run (milliseconds), a wrong False a
    session that fails to load (the 8x1024 decoder's FP32 model: 0.6-1.1 s)."""
    return any(node.op_type in SHAPE_OPS and node.domain in ("", "ai.onnx") for node in model.graph.node)


class OrtCudaRunner(Runner):
    """``ort-cuda``: ORT's CUDA provider; nodes that fall back to the CPU are listed, never hidden. Where the
    session loads with the CPU fallback off, no node is on the CPU; where it needs the fallback, its first run is
    profiled (no second session: a 110 M decoder's takes seconds to create) and the CPU-placed nodes are read from
    that profile."""

    def __init__(self, model: onnx.ModelProto, *, model_dir: Path | None = None) -> None:
        super().__init__(model, name="ort-cuda", rounds_low_precision=True, model_dir=model_dir)
        self._session: Any = None
        self._profiling: tempfile.TemporaryDirectory[str] | None = None
        self._placed: list[tuple[str, str]] | None = None  # CPU-placed nodes, once a run showed them
        self.cpu_nodes: list[tuple[str, str]] = []
        self.fallback_note = ""

    @classmethod
    def prepare(cls) -> None:
        start_cuda_check()  # its child process runs while the run plans; activate_impl reads its answer

    def activate_impl(self) -> None:
        require_cuda(self.name)
        if not places_shape_math_on_cpu(self.model) and self._load_without_fallback():
            return
        self._profiling = tempfile.TemporaryDirectory(prefix="castguard-placement-")
        prefix = os.path.join(self._profiling.name, "castguard")
        self._session = create_session(
            self.model, providers=(CUDA, CPU), runner=self.name, model_dir=self.model_dir, profile_prefix=prefix
        )
        require_cuda_session(self._session, self.name)

    def _load_without_fallback(self) -> bool:
        """Create the session with the CPU fallback off (no node is then on the CPU); False when onnxruntime needs
        the fallback to load the model."""
        try:
            self._session = create_session(
                self.model, providers=(CUDA,), runner=self.name, model_dir=self.model_dir, cpu_fallback=False
            )
        except Exception as err:  # noqa: BLE001 - ORT reports a disabled fallback as a generic failure
            if "fallback to CPU EP has been explicitly disabled" not in str(err):
                raise
            return False
        require_cuda_session(self._session, self.name)
        self._placed = []
        return True

    def profile_placement(self, feed: Feed) -> list[str]:
        """The float compute nodes that ran on the CPU EP (all CPU-placed nodes: :attr:`cpu_nodes`), from this
        runner's first run; before any run, from one profiled run of ``feed`` in a session of its own."""
        self.cpu_nodes = self._placed if self._placed is not None else self._profiled_run(feed)
        floats = float_fallbacks(self.cpu_nodes, self.model)
        self.fallback_note = (
            f"{len(floats)} float node(s) ran on the CPU EP, not the GPU: {', '.join(floats[:8])}" if floats else ""
        )
        return floats

    def _profiled_run(self, feed: Feed) -> list[tuple[str, str]]:
        with tempfile.TemporaryDirectory(prefix="castguard-placement-") as tmp:
            session = create_session(
                self.model,
                providers=(CUDA, CPU),
                runner=self.name,
                model_dir=self.model_dir,
                profile_prefix=os.path.join(tmp, "castguard"),
            )
            run_session(session, feed, runner=self.name)
            return cpu_placed_nodes(Path(session.end_profiling()))

    def infer_impl(self, feed: Feed) -> dict[str, Any]:
        outputs = run_session(self._session, feed, runner=self.name)
        self._end_profiling()  # the first run: where its nodes ran
        return outputs

    def _end_profiling(self) -> None:
        if self._profiling is not None and self._placed is None:
            self._placed = cpu_placed_nodes(Path(self._session.end_profiling()))

    def device_call(self, feed: Feed) -> Callable[[], object] | None:
        if self._placed is None:  # timed calls are never profiled
            run_session(self._session, feed, runner=self.name)
            self._end_profiling()
        return bound_call(self._session, feed, device="cuda", runner=self.name)

    def deactivate_impl(self) -> None:
        self._session = None
        if self._profiling is not None:
            self._profiling.cleanup()
            self._profiling = None
