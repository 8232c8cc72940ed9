"""ONNX element types <-> numpy dtypes, with bf16 through ml_dtypes."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

LOW_TYPES: dict[int, str] = {TensorProto.FLOAT16: "fp16", TensorProto.BFLOAT16: "bf16"}
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})
PRECISION_TO_ELEM: dict[str, int] = {
    "fp32": TensorProto.FLOAT,
    "fp16": TensorProto.FLOAT16,
    "bf16": TensorProto.BFLOAT16,
    "float32": TensorProto.FLOAT,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
}

_ELEM_TO_NP: dict[int, np.dtype] = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.FLOAT16: np.dtype(np.float16),
    TensorProto.BFLOAT16: BFLOAT16,
    TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.INT8: np.dtype(np.int8),
    TensorProto.INT16: np.dtype(np.int16),
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.UINT32: np.dtype(np.uint32),
    TensorProto.UINT64: np.dtype(np.uint64),
    TensorProto.BOOL: np.dtype(np.bool_),
}


def np_dtype(elem_type: int) -> np.dtype:
    """Numpy dtype for an ONNX element type; ``ValueError`` for types numpy cannot hold."""
    try:
        return _ELEM_TO_NP[elem_type]
    except KeyError:
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
        raise ValueError(f"ONNX element type {name} has no numpy equivalent") from None


def elem_type(dtype: np.dtype | type) -> int:
    """ONNX element type for a numpy dtype."""
    dt = np.dtype(dtype)
    for elem, np_dt in _ELEM_TO_NP.items():
        if np_dt == dt:
            return elem
    raise ValueError(f"numpy dtype {dt} has no ONNX element type")


def is_float(elem: int) -> bool:
    return elem in FLOAT_TYPES


def bf16_to_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even to bf16 and return the raw uint16 bits (for ORT/TensorRT bf16 I/O)."""
    return np.asarray(x).astype(BFLOAT16).view(np.uint16)


def bits_to_bf16(bits: np.ndarray) -> np.ndarray:
    """Reinterpret raw uint16 bits as ml_dtypes.bfloat16."""
    return np.asarray(bits, dtype=np.uint16).view(BFLOAT16)


def widen(x: np.ndarray) -> np.ndarray:
    """Exact widening of fp16/bf16 to float32 (other dtypes returned as float64 when float, else unchanged)."""
    arr = np.asarray(x)
    if arr.dtype in (np.dtype(np.float16), BFLOAT16):
        return arr.astype(np.float32)
    return arr
