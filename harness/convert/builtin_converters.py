"""castguard's built-in converters as :class:`~harness.convert.plugins.ConverterPlugin` objects, registered in its
``pyproject.toml`` under ``castguard.converters`` like any third-party converter:

* ``castguard``: castguard's own converter (:func:`harness.convert.convert`), every sweep setting;
* ``ort-fp16``: onnxruntime's transformer optimizer (fusions: attention, LayerNorm, GELU) then its
  ``convert_float_to_float16``; fp16 only; exclusions map to ``op_block_list``, FP32 node precisions to
  ``node_block_list``;
* ``autocast``: NVIDIA ModelOpt AutoCast's ``convert_to_mixed_precision`` (optional extra
  ``castguard[autocast]``); every sweep setting maps to AutoCast's own argument.

Other libraries are imported only when their converter runs; ``ort-fp16`` and ``autocast`` run in a child process
(:mod:`harness.convert.childconvert`), so a crash there is one case error.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass

import onnx

from harness.convert.plugins import SETTINGS, ConverterTraits, ConvertRequest
from harness.convert.result import ConversionResult
from harness.core.errors import RunnerUnavailable, UserError

AUTOCAST_INSTALL = 'pip install "nvidia-modelopt[onnx]"  (or: pip install "castguard[autocast]")'
ORT_MODEL_TYPES = ("bert", "gpt2", "vit", "clip", "unet", "t5", "bart", "phi")


@dataclass(frozen=True)
class CastguardConverter:
    """castguard's own converter: every setting, castguard's magnitudes from the golden's feeds."""

    traits: ConverterTraits = ConverterTraits(
        takes=frozenset(SETTINGS), precisions=("fp16", "bf16"), needs_magnitudes=True, in_child=False
    )

    def __call__(self, request: ConvertRequest) -> ConversionResult:
        from harness.convert.pipeline import convert  # loaded when it converts: a provenance line needs none

        return convert(
            request.model, options=request.options, magnitudes=request.magnitudes, base_dir=request.model_path.parent
        )


def detect_model_type(model: onnx.ModelProto) -> str:
    """onnxruntime optimizer's model type from the graph: a decoder (past key/values, position ids) is gpt2,
    an image input (rank 4 float) is vit, anything else bert (its generic transformer fusions)."""
    inputs = model.graph.input
    names = " ".join(i.name.lower() for i in inputs)
    if "past" in names or "position_ids" in names:
        return "gpt2"
    if any(
        i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and len(i.type.tensor_type.shape.dim) == 4
        for i in inputs
    ):
        return "vit"
    return "bert"


@dataclass(frozen=True)
class OrtFp16Converter:
    """``onnxruntime.transformers.optimizer.optimize_model`` (``opt_level=0``: python fusions only, no
    onnxruntime graph optimisation, so it runs on any CPU) then ``convert_float_to_float16``. Converter options:
    ``model_type`` (default: :func:`detect_model_type`), ``num_heads``/``hidden_size`` (0: detected)."""

    traits: ConverterTraits = ConverterTraits(
        takes=frozenset({"keep_io_types", "exclusions", "node_precisions"}), precisions=("fp16",), library="onnxruntime"
    )

    def __call__(self, request: ConvertRequest) -> onnx.ModelProto:
        from onnxruntime.transformers import float16
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model

        opts = request.converter_options
        model_type = opts.get("model_type") or detect_model_type(request.model)
        if model_type not in ORT_MODEL_TYPES:
            raise UserError(
                where="ort-fp16 converter option model_type",
                problem=f"{model_type!r} is not one of onnxruntime's model types",
                fix=f"use one of {', '.join(ORT_MODEL_TYPES)}",
            )
        fusion = FusionOptions(model_type)
        symbolic = importlib.util.find_spec("sympy") is not None  # onnxruntime's symbolic shape inference needs it
        fusion.enable_shape_inference = symbolic
        optimized = optimize_model(
            str(request.model_path),
            model_type=model_type,
            num_heads=int(opts.get("num_heads", 0)),
            hidden_size=int(opts.get("hidden_size", 0)),
            opt_level=0,
            use_gpu=False,
            optimization_options=fusion,
        )
        o = request.options
        blocked_ops = sorted({*float16.DEFAULT_OP_BLOCK_LIST, *o.op_types_to_exclude})
        blocked_nodes = [key for key, prec in o.node_precisions if prec == "fp32"]
        blocked_ops += [key for key, prec in o.node_precisions if prec == "fp32" and _is_op_type(key)]
        blocked = {"op_block_list": sorted(set(blocked_ops)), "node_block_list": blocked_nodes}
        if symbolic:  # onnxruntime's documented path: its symbolic shape inference types the fused ops
            optimized.convert_float_to_float16(use_symbolic_shape_infer=True, keep_io_types=o.keep_io_types, **blocked)
            model: onnx.ModelProto = optimized.model
            return _declare_domains(model)
        # without sympy: the types the optimizer kept from the FP32 export (onnx cannot infer com.microsoft ops)
        converted: onnx.ModelProto = float16.convert_float_to_float16(
            optimized.model, keep_io_types=o.keep_io_types, disable_shape_infer=True, **blocked
        )
        return _declare_domains(converted)


def _declare_domains(model: onnx.ModelProto) -> onnx.ModelProto:
    """Add an opset import for every node domain the model uses but does not declare: onnxruntime's fusions can
    leave com.microsoft undeclared, which onnxruntime accepts but onnx's checker and shape inference refuse (found
    on the GPU: ORT CUDA's placement check ran onnx inference on the fused BERT)."""
    declared = {o.domain for o in model.opset_import}
    for domain in sorted({n.domain for n in model.graph.node} - declared - {"ai.onnx"}):
        model.opset_import.append(onnx.helper.make_opsetid(domain, 1))
    return model


def _is_op_type(key: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][A-Za-z0-9_]*", key))


@dataclass(frozen=True)
class AutocastConverter:
    """ModelOpt AutoCast. ``exclusions`` -> ``op_types_to_exclude``; node precisions fp32 -> ``nodes_to_exclude``
    (anchored regex of the name) and ``op_types_to_exclude``, fp16/bf16 -> ``nodes_to_include`` /
    ``op_types_to_include``; the golden's first feed is the calibration data."""

    traits: ConverterTraits = ConverterTraits(
        takes=frozenset({"precision", "data_max", "init_max", "exclusions", "keep_io_types", "node_precisions"}),
        precisions=("fp16", "bf16"),
        library="nvidia-modelopt",
    )

    def __call__(self, request: ConvertRequest) -> onnx.ModelProto:
        try:
            from modelopt.onnx.autocast import convert_to_mixed_precision  # type: ignore[import-not-found]
        except ImportError as err:
            raise RunnerUnavailable(
                f"converter autocast needs nvidia-modelopt's ONNX extra ({err}); install it: {AUTOCAST_INSTALL}"
            ) from None
        kwargs = autocast_arguments(request)
        return convert_to_mixed_precision(onnx_path=str(request.model_path), **kwargs)  # type: ignore[no-any-return]


def autocast_arguments(request: ConvertRequest) -> dict[str, object]:
    """The case's settings as AutoCast's keyword arguments (also how the equivalence test calls its CLI)."""
    o = request.options
    fp32 = [key for key, prec in o.node_precisions if prec == "fp32"]
    low = [key for key, prec in o.node_precisions if prec != "fp32"]
    return {
        "low_precision_type": o.low_precision_type,
        "data_max": o.data_max,
        "init_max": o.init_max,
        "keep_io_types": o.keep_io_types,
        "op_types_to_exclude": [*o.op_types_to_exclude, *(k for k in fp32 if _is_op_type(k))],
        "nodes_to_exclude": [re.escape(k) + "$" for k in fp32],
        "op_types_to_include": [k for k in low if _is_op_type(k)],
        "nodes_to_include": [re.escape(k) + "$" for k in low],
        "calibration_data": _calibration(request),
    }


def _calibration(request: ConvertRequest) -> str | dict[str, object] | None:
    if request.calibration_file is not None:
        return str(request.calibration_file)
    return dict(request.calibration[0]) if request.calibration else None


castguard = CastguardConverter()
ort_fp16 = OrtFp16Converter()
autocast = AutocastConverter()
