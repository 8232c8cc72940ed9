"""The converter's contract, checked on one (model, options, feed) case (not a test module).

:func:`check_contract` converts with magnitudes from the case's own feed and asserts, with a message naming
the property: (1) the output passes ``onnx.checker`` (full) and runs on ``emulate``; (2) graph I/O names are
unchanged and I/O types follow keep_io_types; (3) no node whose FP32 magnitudes exceed data_max computes in
low precision; (4) at the default data_max/init_max, no inf/NaN appears that the FP32 model did not have;
(5) the conversion is deterministic (byte-identical).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn
from onnx import TensorProto

from harness.convert import ConversionResult, ConvertOptions, Magnitudes, collect_magnitudes, convert
from harness.convert.opset import name_nodes
from harness.core.dtypes import LOW_MAX, LOW_TYPES, np_dtype
from harness.core.errors import ConversionError
from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.runners import make_runner
from harness.search.strategies import arrays, convert_options, onnx_models

FLOAT = TensorProto.FLOAT
DEFAULTS = ConvertOptions()
VAL_RANGES = ((-1.0, 1.0), (-100.0, 100.0), None)


@dataclass(frozen=True)
class ContractCase:
    """One fuzz case. ``feed`` holds the values the converted model receives, widened to the model's fp32."""

    model: onnx.ModelProto
    options: ConvertOptions
    feed: Feed

    def __repr__(self) -> str:
        arrays_text = ", ".join(f"{k}={v.tolist()!r}" for k, v in self.feed.items())
        return (
            f"ContractCase(options={self.options!r}, feed=({arrays_text}), model=\n{onnx.printer.to_text(self.model)})"
        )


def input_dtype(options: ConvertOptions) -> np.dtype:
    return np.dtype(np.float32) if options.keeps_io_types else np_dtype(options.low_elem)


@st.composite
def cases(draw: DrawFn, *, precision: str) -> ContractCase:
    model = draw(onnx_models())
    options = draw(convert_options(precisions=(precision,)))
    val_range = draw(st.sampled_from(VAL_RANGES), label="feed range")
    feed = {}
    for spec in input_specs(model):
        shape = tuple(d or 1 for d in spec.dims or ())
        values = draw(arrays(dtype=input_dtype(options), shape=shape, val_range=val_range), label=spec.name)
        feed[spec.name] = values.astype(np.float32)
    return ContractCase(model=model, options=options, feed=feed)


def _types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output, *graph.value_info]}
    types.update({t.name: t.data_type for t in graph.initializer})
    return types


def _finite(outputs: Mapping[str, np.ndarray]) -> bool:
    return all(bool(np.isfinite(np.asarray(v, dtype=np.float64)).all()) for v in outputs.values())


def check_io(model: onnx.ModelProto, result: ConversionResult, options: ConvertOptions) -> None:
    low = options.low_elem
    for role, before, after in (
        ("input", model.graph.input, result.model.graph.input),
        ("output", model.graph.output, result.model.graph.output),
    ):
        assert [v.name for v in after] == [v.name for v in before], f"graph {role} names changed"
        for old, new in zip(before, after):
            want = FLOAT if options.keeps_io_types else low
            got = new.type.tensor_type.elem_type
            assert got == want, (
                f"{role} {old.name!r} is {TensorProto.DataType.Name(got)}, want "
                f"{TensorProto.DataType.Name(want)} (keep_io_types={options.keep_io_types})"
            )


def check_data_max(
    model: onnx.ModelProto, result: ConversionResult, magnitudes: Magnitudes, options: ConvertOptions
) -> None:
    """Nodes are matched by name (blank names get the converter's ``<OpType>_<index>``). A node computes in
    low precision when one of its outputs is fp16/bf16 in the converted model (an fp32 node may still read
    a stored fp16 tensor through a free type variable, e.g. Pow's exponent: that is no low computation)."""
    named = onnx.ModelProto()
    named.CopyFrom(model)
    name_nodes(named)
    originals = {n.name: n for n in named.graph.node}
    converted = {
        n.name: n for n in result.model.graph.node if n.name in originals and n.op_type == originals[n.name].op_type
    }
    assert set(converted) == set(originals), f"nodes {sorted(set(originals) - set(converted))} disappeared"
    types = _types(result.model)
    constants = {i.name for i in model.graph.initializer} | {
        n.output[0] for n in model.graph.node if n.op_type == "Constant"
    }
    for name, node in converted.items():
        if node.op_type == "Constant" or not any(types.get(t) in LOW_TYPES for t in node.output):
            continue
        for tensor in [*originals[name].input, *originals[name].output]:
            absmax = magnitudes.absmax.get(tensor, 0.0)
            assert tensor in constants or absmax <= options.data_max, (
                f"node {name!r} ({node.op_type}) runs in {options.low_precision_type} but its tensor "
                f"{tensor!r} reaches {absmax:g} > data_max {options.data_max:g} in FP32"
            )


def check_refusal(
    err: ConversionError, model: onnx.ModelProto, options: ConvertOptions, magnitudes: Magnitudes
) -> None:
    """The one refusal the contract allows: a graph I/O that would become low but exceeds the low type's max."""
    if err.step != "graph I/O types":
        raise err
    io = {v.name for v in [*model.graph.input, *model.graph.output]}
    assert not options.keeps_io_types and err.node in io, str(err)
    assert LOW_MAX[options.low_elem] < magnitudes.absmax[err.node] < math.inf, str(err)


def check_contract(case: ContractCase) -> ConversionResult | None:
    """Convert and check the contract; None when the converter refused with a justified I/O range error."""
    model, options = case.model, case.options
    magnitudes = collect_magnitudes(model, feeds=[case.feed])
    try:
        result = convert(model, options=options, magnitudes=magnitudes)
    except ConversionError as err:
        check_refusal(err, model, options, magnitudes)
        return None
    onnx.checker.check_model(result.model, full_check=True)
    again = convert(model, options=options, magnitudes=magnitudes)
    assert again.model.SerializeToString(deterministic=True) == result.model.SerializeToString(deterministic=True), (
        "conversion is not deterministic"
    )
    check_io(model, result, options)
    check_data_max(model, result, magnitudes, options)
    golden = make_runner("ort", model).run([case.feed]).outputs[0]
    obtained = make_runner("emulate", result.model).run(cast_feeds([case.feed], input_specs(result.model)))
    defaults = options.data_max == DEFAULTS.data_max and options.init_max == DEFAULTS.init_max
    if defaults and _finite(golden):
        bad = [
            name
            for name, value in obtained.outputs[0].items()
            if not np.isfinite(np.asarray(value, dtype=np.float64)).all()
        ]
        assert not bad, (
            f"outputs {bad} have inf/NaN in {options.low_precision_type}; FP32 is finite "
            f"(data_max={options.data_max:g})"
        )
    return result
