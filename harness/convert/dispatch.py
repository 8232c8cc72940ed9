"""One conversion by any converter, or the user's own converted file, as a :class:`ConversionResult`.

castguard's own converter keeps its plan (its types are the plan's); every other converter's output, and a
``--candidate`` file, is described from the converted graph's own types (:mod:`harness.convert.described`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import onnx

from harness.convert.childconvert import convert_in_child
from harness.convert.described import describe_converted
from harness.convert.plugins import ConvertRequest, load_converter, registered
from harness.convert.result import ConversionResult
from harness.core.dtypes import FLOAT_TYPES
from harness.core.errors import ModelError


def run_converter(name: str, request: ConvertRequest) -> ConversionResult:
    """Convert with the named converter (in a child process when its traits say so)."""
    plugin = load_converter(name)
    shapes = {k: tuple(v.shape) for k, v in request.calibration[0].items()} if request.calibration else {}
    if plugin.traits.in_child:
        model = convert_in_child(registered()[name].value, request, name=name)
        return describe_converted(model, input_shapes=shapes, notes=(f"converted by {name}",))
    result = plugin(request)
    if isinstance(result, ConversionResult):
        return result
    where = request.model_path.parent
    return describe_converted(result, input_shapes=shapes, base_dir=where, notes=(f"converted by {name}",))


def load_candidate(path: Path, *, input_shapes: Mapping[str, tuple[int, ...]]) -> ConversionResult:
    """The user's converted model (``--candidate KEY=PATH``), described from its own types."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - onnx raises several types for a bad file
        raise ModelError(
            where=path,
            problem=f"the candidate model does not load: {type(err).__name__}: {err}",
            fix="pass the converted .onnx file: --candidate KEY=PATH",
        ) from None
    return describe_converted(model, input_shapes=input_shapes, base_dir=path.parent, notes=(f"candidate {path}",))


_Kind = tuple[str, tuple[int | None, ...]]


def _signature(model: onnx.ModelProto) -> tuple[dict[str, _Kind], dict[str, _Kind]]:
    """Graph inputs (initializers excluded) and outputs: name -> (type kind, dims: None where dynamic); every
    float type is the kind "float"."""

    def kind(value: onnx.ValueInfoProto) -> _Kind:
        tensor = value.type.tensor_type
        elem = tensor.elem_type
        name = "float" if elem in FLOAT_TYPES else onnx.helper.tensor_dtype_to_np_dtype(elem).name if elem else "?"
        return name, tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)

    inits = {t.name for t in model.graph.initializer}
    return (
        {v.name: kind(v) for v in model.graph.input if v.name not in inits},
        {v.name: kind(v) for v in model.graph.output},
    )


def _same(a: dict[str, _Kind], b: dict[str, _Kind]) -> bool:
    """Same names, kinds and ranks, and no dim that both fix to different sizes."""
    if a.keys() != b.keys():
        return False
    for name, (kind, dims) in a.items():
        other_kind, other_dims = b[name]
        if kind != other_kind or len(dims) != len(other_dims):
            return False
        if any(x is not None and y is not None and x != y for x, y in zip(dims, other_dims)):
            return False
    return True


def _describe(model: onnx.ModelProto) -> str:
    def one(value: onnx.ValueInfoProto) -> str:
        elem = value.type.tensor_type.elem_type
        dims = ",".join(d.dim_param or str(d.dim_value) for d in value.type.tensor_type.shape.dim)
        return f"{value.name}:{onnx.TensorProto.DataType.Name(elem).lower()}[{dims}]"

    inits = {t.name for t in model.graph.initializer}
    ins = ", ".join(one(v) for v in model.graph.input if v.name not in inits)
    return f"inputs ({ins}) -> outputs ({', '.join(one(v) for v in model.graph.output)})"


def check_candidate(fp32: onnx.ModelProto, fp32_path: Path, candidate_path: Path) -> str:
    """The candidate's inputs and outputs are the FP32 model's: same names, ranks and non-float types (a float
    may be fp32, fp16 or bf16: its feeds are cast, as a deployment would). One error naming both signatures.
    Returns the candidate's low precision (bf16 when it holds bf16 and no fp16), which sets its tolerances."""
    if not candidate_path.is_file():
        raise ModelError(
            where=candidate_path, problem="the candidate model does not exist", fix="pass --candidate KEY=PATH"
        )
    try:
        candidate = onnx.load(str(candidate_path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - onnx raises several types for a bad file
        raise ModelError(
            where=candidate_path, problem=f"the candidate model does not load: {err}", fix="pass a converted .onnx"
        ) from None
    (fp32_in, fp32_out), (cand_in, cand_out) = _signature(fp32), _signature(candidate)
    if not (_same(fp32_in, cand_in) and _same(fp32_out, cand_out)):
        raise ModelError(
            where=candidate_path,
            problem=f"its signature {_describe(candidate)} does not match the FP32 model {fp32_path}: "
            f"{_describe(fp32)}",
            fix="pass the candidate converted from this FP32 model (same input and output names, ranks, sizes and "
            "integer types; a float may be fp32, fp16 or bf16), or the FP32 model it was converted from",
        )
    elems = {t.data_type for t in candidate.graph.initializer}
    elems |= {v.type.tensor_type.elem_type for v in (*candidate.graph.value_info, *candidate.graph.input)}
    elems |= {a.i for n in candidate.graph.node if n.op_type == "Cast" for a in n.attribute if a.name == "to"}
    return "bf16" if onnx.TensorProto.BFLOAT16 in elems and onnx.TensorProto.FLOAT16 not in elems else "fp16"
