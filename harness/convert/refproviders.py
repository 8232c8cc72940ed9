"""The reference run's execution providers: AutoCast's names (``cpu``, ``cuda:N``, ``trt``, ``dml``) as
onnxruntime's, with their options (the device, TensorRT's plugin libraries), TensorRT first as AutoCast orders
them."""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.errors import ConversionError
from harness.core.providers import CPU, CUDA, DIRECTML, TENSORRT

Provider = tuple[str, dict[str, str]]
_PROVIDERS = {"cpu": CPU, "cuda": CUDA, "trt": TENSORRT, "dml": DIRECTML}


def provider_list(providers: Sequence[str], trt_plugins: Sequence[str]) -> list[Provider]:
    result: list[Provider] = []
    for spec in providers:
        kind, _, device = spec.partition(":")
        if kind not in _PROVIDERS or (device and not device.isdigit()):
            raise ConversionError(
                where="providers",
                problem=f"unknown execution provider {spec!r}",
                fix="use cpu, cuda:N, trt or dml",
                step="reference run",
            )
        options: dict[str, str] = {"device_id": device} if device else {}
        if kind == "cuda":
            options["use_tf32"] = "0"  # the FP32 reference's MatMuls in FP32, not TF32's 10-bit mantissa
        if kind == "trt" and trt_plugins:
            options["trt_extra_plugin_lib_paths"] = ";".join(trt_plugins)
        result.append((_PROVIDERS[kind], options))
    result.sort(key=lambda p: p[0] != TENSORRT)  # TensorRT first, as AutoCast orders it
    return result
