"""The precision vocabulary and ONNX element types <-> numpy dtypes, with bf16 through ml_dtypes.

This is the one home of castguard's precision names (the sweep, the converter, the runners and the report all
use these tables): ``fp16``/``bf16`` are the low precisions, ``fp32`` the high one.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

PRECISIONS: tuple[str, ...] = ("fp16", "bf16")
"""The low precisions a model can be converted to (the sweep's ``precisions``, ``--low_precision_type``)."""
NODE_PRECISIONS: tuple[str, ...] = ("fp16", "bf16", "fp32")
"""What one node or op type may be pinned to (``--node-precisions``)."""
PRECISION_ELEMS: dict[str, int] = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
MIN_OPSET: dict[str, int] = {"fp16": 13, "bf16": 22}
"""The lowest opset with full support of each low precision (AutoCast's recommended minimum; bf16 Cast/ops: 22)."""
PRECISION_ALIASES: dict[str, str] = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
LOW_TYPES: dict[int, str] = {TensorProto.FLOAT16: "fp16", TensorProto.BFLOAT16: "bf16"}
LOW_ELEMS = frozenset(LOW_TYPES)
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})
INT_TYPES = frozenset(
    {
        TensorProto.INT8,
        TensorProto.INT16,
        TensorProto.INT32,
        TensorProto.INT64,
        TensorProto.UINT8,
        TensorProto.UINT16,
        TensorProto.UINT32,
        TensorProto.BOOL,
    }
)
"""Integer and bool element types that int64 holds exactly (UINT64 aside): compared exactly, reduced as int64."""
ELEM_NAMES: dict[int, str] = {
    TensorProto.FLOAT: "fp32",
    TensorProto.FLOAT16: "fp16",
    TensorProto.BFLOAT16: "bf16",
    TensorProto.DOUBLE: "fp64",
}
FP16_MAX = float(np.finfo(np.float16).max)
LOW_MAX: dict[int, float] = {
    TensorProto.FLOAT16: FP16_MAX,
    TensorProto.BFLOAT16: float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),  # type: ignore[no-untyped-call]
}
"""The largest finite value of each low type."""

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


def bf16_to_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even to bf16 and return the raw uint16 bits (for ORT/TensorRT bf16 I/O)."""
    return np.asarray(x).astype(BFLOAT16).view(np.uint16)


def bits_to_bf16(bits: np.ndarray) -> np.ndarray:
    """Reinterpret raw uint16 bits as ml_dtypes.bfloat16."""
    return np.asarray(bits, dtype=np.uint16).view(BFLOAT16)


def saturating_cast(array: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, int, float]:
    """`array` in `dtype`; into fp16/bf16, finite values beyond the type's largest value are clamped to +-max
    instead of becoming inf (inf/NaN stay). Returns (result, values clamped, largest clamped |x|)."""
    limit = (
        LOW_MAX[TensorProto.FLOAT16]
        if dtype == np.float16
        else (LOW_MAX[TensorProto.BFLOAT16] if dtype == BFLOAT16 else None)
    )
    source_max = _largest(array.dtype)
    if limit is None or source_max is None or source_max <= limit or not array.size:
        return array.astype(dtype), 0, 0.0
    if max(-float(array.min()), float(array.max())) <= limit:  # two reductions, no temporaries: the usual case
        return array.astype(dtype), 0, 0.0
    over = np.isfinite(array) & (np.abs(array) > limit)
    count = int(over.sum())
    if not count:
        return array.astype(dtype), 0, 0.0
    worst = float(np.abs(array[over]).max())
    return np.where(over, np.sign(array) * limit, array).astype(dtype), count, worst


def _largest(dtype: np.dtype) -> float | None:
    if dtype == BFLOAT16:
        return LOW_MAX[TensorProto.BFLOAT16]
    return float(np.finfo(dtype).max) if dtype.kind == "f" else None
