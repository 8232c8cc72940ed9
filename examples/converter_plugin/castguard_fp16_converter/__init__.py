"""An example castguard converter plugin: every float tensor to fp16 except the blocked ops, with onnxconverter-common's
``convert_float_to_float16`` (the copy that onnxruntime ships as ``onnxruntime.transformers.float16``)."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from harness.convert.plugins import ConverterTraits, ConvertRequest


@dataclass(frozen=True)
class PlainFp16:
    """Takes ``keep_io_types`` and ``exclusions`` (op types kept FP32); fp16 only."""

    traits: ConverterTraits = ConverterTraits(
        takes=frozenset({"keep_io_types", "exclusions"}), precisions=("fp16",), library="onnxruntime"
    )

    def __call__(self, request: ConvertRequest) -> onnx.ModelProto:
        from onnxruntime.transformers import float16

        blocked = sorted({*float16.DEFAULT_OP_BLOCK_LIST, *request.options.op_types_to_exclude})
        model: onnx.ModelProto = float16.convert_float_to_float16(
            request.model, keep_io_types=request.options.keep_io_types, op_block_list=blocked
        )
        return model


converter = PlainFp16()
