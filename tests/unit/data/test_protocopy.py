"""A model proto holds the bytes it shows, not every byte it ever held (protobuf's upb keeps a replaced field's
bytes until the whole message dies): :func:`harness.data.protocopy.compacted`, and the converter's result, which
is made from a working copy of the FP32 model whose weights it rewrote."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, convert
from harness.data.protocopy import compacted, values_left_out
from tests.helpers.memory import allocated, needs_mallinfo2

WEIGHT_BYTES = 32 << 20


def _matmul(rows: int = 2048) -> onnx.ModelProto:
    cols = WEIGHT_BYTES // 4 // rows
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x], [y], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_mallinfo2
def test_a_compacted_copy_drops_the_bytes_its_fields_replaced() -> None:
    before = allocated()
    work = _matmul()
    weight = work.graph.initializer[0]
    weight.raw_data = np.frombuffer(weight.raw_data, np.float32).astype(np.float16).tobytes()  # the 32 MB stay
    weight.data_type = TensorProto.FLOAT16
    del weight
    bloated = allocated() - before
    assert bloated > 1.4 * WEIGHT_BYTES  # what this test is about: both generations of the bytes are held
    fresh = compacted(work)
    del work
    held = allocated() - before
    assert held < 0.75 * WEIGHT_BYTES, f"{held >> 20} MB held for a 16 MB model"
    assert fresh.graph.initializer[0].data_type == TensorProto.FLOAT16
    assert len(fresh.graph.initializer[0].raw_data) == WEIGHT_BYTES // 2


@needs_mallinfo2
def test_a_conversion_result_holds_its_low_precision_weights_only() -> None:
    """An fp16 conversion of a model with 32 MB of FP32 weights holds about 16 MB once the FP32 model is gone, not
    the 48 MB its working copy did (a decoder's fix evaluations held the FP32 weights once more for each)."""
    before = allocated()
    model = _matmul()
    result = convert(model, options=ConvertOptions(low_precision_type="fp16", data_max=float("inf")), magnitudes=None)
    del model
    held = allocated() - before
    assert held < 0.75 * WEIGHT_BYTES, f"{held >> 20} MB held for a 16 MB conversion"
    assert result.model.graph.initializer[0].data_type == TensorProto.FLOAT16


def test_values_left_out_keeps_the_tensors_own_messages_and_the_rest_whole() -> None:
    model = _matmul(rows=64)
    small = numpy_helper.from_array(np.arange(4, dtype=np.float32), "small")
    model.graph.initializer.append(small)
    light, values = values_left_out(model)
    assert list(values) == ["w"] and values["w"].raw_data == model.graph.initializer[0].raw_data
    stub, kept = light.graph.initializer
    assert (stub.name, stub.data_type, list(stub.dims)) == (
        "w",
        TensorProto.FLOAT,
        list(model.graph.initializer[0].dims),
    )
    assert not stub.raw_data and kept == small
    _, none = values_left_out(model, lambda tensor: tensor.data_type == TensorProto.FLOAT16)
    assert none == {}
