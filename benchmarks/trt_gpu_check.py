"""On a GPU machine: build bundled mnist (fp16, castguard-converted) with TensorRT(-RTX), then try to run it.

    python benchmarks/trt_gpu_check.py

Prints, in order: which TensorRT was imported; the GPU (cuda-python) with its compute capability; the build
check (parse + build + layer types, in a child process); and the TrtRunner's run (it asks the runtime whether
the engine is valid on this GPU before deserializing it): the outputs compared with onnxruntime FP32 where the GPU can run the engine, otherwise the
exact skip reason (TensorRT-RTX 1.7.1 runs engines on compute capability 8.0, 8.6, 8.9 and 12.x, so on an
H100/H200, CC 9.0, the expected last line is ``SKIP: TensorRT-RTX ... cannot run its engine on this GPU ...``).
Needs: castguard's runtime dependencies, the TensorRT-RTX wheels (or full TensorRT), and cuda-python.
Exit status 0 when it ran or skipped with a reason, 1 when something failed.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

import test_models
from harness import ConvertOptions, RunnerUnavailable, collect_magnitudes, convert_model
from harness.data.feeds import cast_feeds, input_specs
from harness.runners.tensorrt.device import open_device
from harness.runners.tensorrt.library import import_tensorrt
from harness.runners.tensorrt.runner import TrtRunner
from harness.runners.tensorrt.typed_build import check_build


def main() -> int:
    path = test_models.MODELS["mnist"].path
    model = onnx.load(str(path))
    with np.load(path.parent / "digits.npz") as npz:
        x = npz["Input3"][:1].astype(np.float32)
    try:
        trt_module = import_tensorrt()
    except RunnerUnavailable as err:
        print(f"SKIP: {err}")
        return 0
    print(f"TensorRT: {trt_module.backend} (module {trt_module.name})")
    try:
        device = open_device()
        print(f"GPU: {device.name}, compute capability {device.compute_capability[0]}.{device.compute_capability[1]}")
        device.close()
    except RunnerUnavailable as err:
        print(f"GPU: none usable: {err}")
    converted = convert_model(
        model, options=ConvertOptions(keep_io_types=True), magnitudes=collect_magnitudes(model, feeds=[{"Input3": x}])
    ).model
    start = time.perf_counter()
    build = check_build(converted, model_dir=path.parent)
    print(
        f"build check: {build.summary()} ({build.checked} node outputs compared; "
        f"{time.perf_counter() - start:.2f} s with the child process)"
    )
    if not build.ok:
        return 1
    (gold,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"Input3": x}
    )
    runner = TrtRunner(converted, model_dir=path.parent)
    try:
        result = runner.run(cast_feeds([{"Input3": x}], input_specs(converted)))
    except RunnerUnavailable as err:
        print(f"SKIP: {err}")
        return 0
    out = result.outputs[0]["Plus214_Output_0"].astype(np.float32)
    error = float(np.abs(out - gold).max())
    print(
        f"ran on {result.runner}: max |trt - ort fp32| = {error:.3e}; argmax {int(out.argmax())} vs "
        f"{int(gold.argmax())}; precision mismatches: {runner.check_precisions() or 'none'}"
    )
    return 0 if error < 5e-2 and int(out.argmax()) == int(gold.argmax()) else 1


if __name__ == "__main__":
    sys.exit(main())
