"""TensorRT data types, host buffers and version-dependent build flags, as pure functions.

Nothing here imports tensorrt: the runner (``harness.runners.tensorrt.runner``) passes in the names and values
it reads from the installed TensorRT (``trt.__version__``, enum member names), so every decision is
tested on machines without a GPU. Facts: ``docs/runtime-facts.md`` §3.1, §3.3, §3.4.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
from onnx import TensorProto

from harness.core.dtypes import BFLOAT16, PRECISIONS, bf16_to_bits, bits_to_bf16
from harness.core.errors import RunnerError, RunnerUnavailable
from harness.runners.tensorrt.plan import Unsupported
from harness.runners.tensorrt.plan import builder_flags_to_clear as builder_flags_to_clear
from harness.runners.tensorrt.plan import network_creation_flags as _creation_flags
from harness.runners.tensorrt.plan import trt_version as trt_version

# TensorRT DataType enum name -> (precision label, ONNX element type name). One table, used both ways;
# an ONNX type this onnx release lacks (FLOAT4E2M1 arrived in onnx 1.18) has no ONNX mapping.
_TRT_TYPES: tuple[tuple[str, str, str], ...] = (
    ("FLOAT", "fp32", "FLOAT"),
    ("HALF", "fp16", "FLOAT16"),
    ("BF16", "bf16", "BFLOAT16"),
    ("FP8", "fp8", "FLOAT8E4M3FN"),
    ("FP4", "fp4", "FLOAT4E2M1"),
    ("INT4", "int4", "INT4"),
    ("INT8", "int8", "INT8"),
    ("UINT8", "uint8", "UINT8"),
    ("INT32", "int32", "INT32"),
    ("INT64", "int64", "INT64"),
    ("BOOL", "bool", "BOOL"),
    ("E8M0", "e8m0", "FLOAT8E8M0"),
)
_ONNX_NAMES = frozenset(TensorProto.DataType.keys())
TRT_TO_ELEM: Mapping[str, int] = MappingProxyType(
    {trt: TensorProto.DataType.Value(onnx_name) for trt, _, onnx_name in _TRT_TYPES if onnx_name in _ONNX_NAMES}
)
ELEM_TO_TRT: Mapping[int, str] = MappingProxyType({elem: trt for trt, elem in TRT_TO_ELEM.items()})
TRT_TO_PRECISION: Mapping[str, str] = MappingProxyType({trt: label for trt, label, _ in _TRT_TYPES})
ELEM_TO_PRECISION: Mapping[int, str] = MappingProxyType(
    {elem: TRT_TO_PRECISION[trt] for trt, elem in TRT_TO_ELEM.items()}
)
LOW_PRECISIONS = frozenset({*PRECISIONS, "fp8", "fp4"})  # castguard's low precisions, and TensorRT's narrower
FLOAT_PRECISIONS = LOW_PRECISIONS | {"fp32"}

# Host buffer dtype per engine I/O type. bf16 travels as its raw uint16 bits (numpy has no bfloat16 that
# TensorRT understands); fp8/fp4/int4 I/O is not supported: keep such tensors inside the engine.
_HOST_DTYPES: Mapping[str, np.dtype] = MappingProxyType(
    {
        "FLOAT": np.dtype(np.float32),
        "HALF": np.dtype(np.float16),
        "BF16": np.dtype(np.uint16),
        "INT8": np.dtype(np.int8),
        "UINT8": np.dtype(np.uint8),
        "INT32": np.dtype(np.int32),
        "INT64": np.dtype(np.int64),
        "BOOL": np.dtype(np.bool_),
    }
)
_USER_DTYPES: Mapping[str, np.dtype] = MappingProxyType({**_HOST_DTYPES, "BF16": BFLOAT16})

# Ordered substring rules on the upper-cased datatype/format text. Order matters: "FLOAT" is inside
# "BFLOAT16", "FLOAT16" and "FLOAT8E4M3"; "FLOAT8" is inside "FLOAT8E8M0"; "INT8" is inside "UINT8".
_DTYPE_RULES: tuple[tuple[str, str], ...] = (
    ("E8M0", "e8m0"),
    ("BFLOAT16", "bf16"),
    ("BF16", "bf16"),
    ("FLOAT8", "fp8"),
    ("FP8", "fp8"),
    ("E4M3", "fp8"),
    ("E5M2", "fp8"),
    ("FLOAT4", "fp4"),
    ("FP4", "fp4"),
    ("E2M1", "fp4"),
    ("FLOAT16", "fp16"),
    ("HALF", "fp16"),
    ("FP16", "fp16"),
    ("FLOAT", "fp32"),
    ("FP32", "fp32"),
    ("UINT8", "uint8"),
    ("INT64", "int64"),
    ("INT32", "int32"),
    ("INT8", "int8"),
    ("INT4", "int4"),
    ("BOOL", "bool"),
)


def _trt_key(name: str) -> str:
    """``"HALF"``, ``"DataType.HALF"`` or ``"half"`` -> ``"HALF"``."""
    return name.rsplit(".", 1)[-1].upper()


def precision_of_trt_dtype(name: str) -> str:
    """``"HALF"`` (or ``"DataType.HALF"``) -> ``"fp16"``; ValueError for names TensorRT does not have."""
    key = _trt_key(name)
    if key not in TRT_TO_PRECISION:
        raise ValueError(f"unknown TensorRT data type {name!r}; known: {', '.join(TRT_TO_PRECISION)}")
    return TRT_TO_PRECISION[key]


def precision_from_text(text: str) -> str | None:
    """Precision label for an inspector datatype/format string, or None when it names no data type."""
    upper = text.upper()
    return next((label for token, label in _DTYPE_RULES if token in upper), None)


def host_dtype(trt_dtype: str, *, tensor: str) -> np.dtype:
    """The numpy dtype of the pinned host buffer for an engine I/O tensor of TensorRT type ``trt_dtype``."""
    key = _trt_key(trt_dtype)
    if key not in _HOST_DTYPES:
        raise RunnerError(
            f"engine I/O tensor {tensor!r} has TensorRT type {key}, which castguard cannot feed "
            "or read on the host; keep fp8/fp4/int4 tensors inside the model"
        )
    return _HOST_DTYPES[key]


def to_engine_array(arr: np.ndarray, trt_dtype: str, *, tensor: str) -> np.ndarray:
    """A C-contiguous host array for an engine input; bf16 becomes its uint16 bits.

    The feed must already have the engine's type (strongly typed engines keep the ONNX I/O types):
    a mismatch is an error, never a silent cast.
    """
    key = _trt_key(trt_dtype)
    expected = _USER_DTYPES.get(key)
    if expected is None:
        host_dtype(key, tensor=tensor)  # raises the unsupported-type error
    if np.asarray(arr).dtype != expected:
        raise RunnerError(
            f"input {tensor!r} is {np.asarray(arr).dtype} but the engine expects {key} "
            f"({expected}); the ONNX model and the engine disagree on this input's type"
        )
    if key == "BF16":
        return np.ascontiguousarray(bf16_to_bits(arr))
    return np.ascontiguousarray(arr)


def from_engine_array(arr: np.ndarray, trt_dtype: str, *, tensor: str) -> np.ndarray:
    """An engine output from its host buffer: bf16 bits become ml_dtypes.bfloat16, others are returned as is."""
    key = _trt_key(trt_dtype)
    if np.asarray(arr).dtype != host_dtype(key, tensor=tensor):
        raise RunnerError(
            f"output {tensor!r}: host buffer is {np.asarray(arr).dtype}, "
            f"expected {host_dtype(key, tensor=tensor)} for {key}"
        )
    return bits_to_bf16(arr) if key == "BF16" else np.asarray(arr)


def network_creation_flags(version: str, flag_values: Mapping[str, int], *, rtx: bool = False) -> int:
    """:func:`harness.runners.tensorrt.plan.network_creation_flags`, with RunnerUnavailable for a TensorRT that cannot
    build strongly typed networks (the suite skips with that reason)."""
    try:
        return _creation_flags(version, flag_values, rtx=rtx)
    except Unsupported as err:
        raise RunnerUnavailable(str(err)) from err
