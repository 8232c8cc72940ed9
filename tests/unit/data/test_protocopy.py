"""A model proto holds the bytes it shows, not every byte it ever held (protobuf's upb keeps a replaced field's
bytes until the whole message dies): :func:`harness.data.protocopy.compacted`, and the converter's result, which
is made from a working copy of the FP32 model whose weights it rewrote."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, convert
from harness.data.protocopy import compacted

WEIGHT_BYTES = 32 << 20


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _allocated() -> int:
    """Bytes the C allocator has handed out and not had back (glibc's mallinfo2: heap and mmapped chunks)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    gc.collect()
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def _glibc_mallinfo2() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "mallinfo2")
    except OSError:
        return False


needs_mallinfo2 = pytest.mark.skipif(not _glibc_mallinfo2(), reason="needs glibc's mallinfo2 (Linux, glibc 2.33+)")


def _matmul(rows: int = 2048) -> onnx.ModelProto:
    cols = WEIGHT_BYTES // 4 // rows
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x], [y], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_mallinfo2
def test_a_compacted_copy_drops_the_bytes_its_fields_replaced() -> None:
    before = _allocated()
    work = _matmul()
    weight = work.graph.initializer[0]
    weight.raw_data = np.frombuffer(weight.raw_data, np.float32).astype(np.float16).tobytes()  # the 32 MB stay
    weight.data_type = TensorProto.FLOAT16
    del weight
    bloated = _allocated() - before
    assert bloated > 1.4 * WEIGHT_BYTES  # what this test is about: both generations of the bytes are held
    fresh = compacted(work)
    del work
    held = _allocated() - before
    assert held < 0.75 * WEIGHT_BYTES, f"{held >> 20} MB held for a 16 MB model"
    assert fresh.graph.initializer[0].data_type == TensorProto.FLOAT16
    assert len(fresh.graph.initializer[0].raw_data) == WEIGHT_BYTES // 2


@needs_mallinfo2
def test_a_conversion_result_holds_its_low_precision_weights_only() -> None:
    """An fp16 conversion of a model with 32 MB of FP32 weights holds about 16 MB once the FP32 model is gone, not
    the 48 MB its working copy did (a decoder's fix evaluations held the FP32 weights once more for each)."""
    before = _allocated()
    model = _matmul()
    result = convert(model, options=ConvertOptions(low_precision_type="fp16", data_max=float("inf")), magnitudes=None)
    del model
    held = _allocated() - before
    assert held < 0.75 * WEIGHT_BYTES, f"{held >> 20} MB held for a 16 MB conversion"
    assert result.model.graph.initializer[0].data_type == TensorProto.FLOAT16
