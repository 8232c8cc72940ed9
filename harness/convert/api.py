"""`convert_to_mixed_precision`: AutoCast 0.47's function, same arguments, meanings and defaults.

A drop-in for ``modelopt.onnx.autocast.convert_to_mixed_precision``: it loads the model, runs the
reference pass (skipped when ``data_max`` is inf, as in AutoCast), classifies, converts, validates and
returns the ``onnx.ModelProto`` (it does not save). Keyword-only extras follow AutoCast's arguments.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
import onnx

from harness.convert.calibration import dynamic_dims_warning, sized_inputs
from harness.convert.flopshapes import concrete_inputs
from harness.convert.magnitudes import Magnitudes
from harness.convert.options import ConvertOptions
from harness.convert.pipeline import convert
from harness.convert.refdata import shape_like_inputs, unholdable_inputs
from harness.convert.reference import ReferenceData, reference_run
from harness.convert.referror import ReferenceRunError
from harness.convert.result import ConversionResult
from harness.core.errors import ConversionError
from harness.data.onnxfile import load_model

LOG = logging.getLogger("harness.convert")


DEFAULT_DATA_MAX = 512
DEFAULT_INIT_MAX = np.finfo(np.float16).max


def convert_to_mixed_precision(
    onnx_path: str | Path | onnx.ModelProto,
    low_precision_type: str = "fp16",
    nodes_to_exclude: Sequence[str] | None = None,
    op_types_to_exclude: Sequence[str] | None = None,
    nodes_to_include: Sequence[str] | None = None,
    op_types_to_include: Sequence[str] | None = None,
    data_max: float | None = DEFAULT_DATA_MAX,
    init_max: float | None = DEFAULT_INIT_MAX,  # type: ignore[assignment]  # AutoCast's numpy default, verbatim
    keep_io_types: bool = False,
    calibration_data: str | Path | Mapping[str, np.ndarray] | None = None,
    custom_rule: object | None = None,
    init_conversion_max_bytes: int | None = None,
    providers: Sequence[str] = ["cpu"],  # noqa: B006 - AutoCast 0.47's defaults, verbatim; never mutated
    trt_plugins: Sequence[str] = [],  # noqa: B006
    trt_plugins_precision: Sequence[str] = [],  # noqa: B006
    max_depth_of_reduction: int | None = None,
    opset: int | None = None,
    use_standalone_type_inference: bool = False,
    *,
    custom_ops: Sequence[str] | None = None,
    log_level: str | None = None,
    node_precisions: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
    fp32_accumulation: bool = False,
    respect_existing_types: bool = False,
    respect_fp32_casts: bool = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
    target: str = "any",
    fp32_island_min_flops: int = 4096,
) -> onnx.ModelProto:
    """Convert an FP32 model to mixed FP32/FP16 or FP32/BF16; see `ConvertOptions` for every rule.

    ``data_max=None`` / ``init_max=None`` mean no limit, as in AutoCast. A missing model file raises
    :class:`~harness.core.errors.ModelNotFound`, which is also a ``FileNotFoundError``.

    Dynamic dims that neither ``input_shapes`` nor ``calibration_data`` sizes are set for the random reference
    data, with one warning naming each: a batch (leading dim of rank >= 2) to 1, every other dim to 128
    (:data:`~harness.data.sizing.DYNAMIC_DEFAULT`; AutoCast uses 1, which hides sums along a sequence). Dims that
    share a ``dim_param`` share a size; see :mod:`harness.data.sizing`."""
    if log_level is not None:
        LOG.setLevel(log_level.upper())
    if custom_rule is not None:
        raise ConversionError(
            where="custom_rule",
            step="options",
            problem="AutoCast NodeRuleBase custom rules are not supported",
            fix="express the rule with nodes_to_exclude / op_types_to_exclude / node_precisions",
        )
    if use_standalone_type_inference:
        LOG.info("use_standalone_type_inference: not needed, types come from onnx inference (non-strict)")
    pairs = tuple(node_precisions.items()) if isinstance(node_precisions, Mapping) else tuple(node_precisions or ())
    options = ConvertOptions(
        low_precision_type=low_precision_type,
        nodes_to_exclude=tuple(nodes_to_exclude or ()),
        op_types_to_exclude=tuple(op_types_to_exclude or ()),
        nodes_to_include=tuple(nodes_to_include or ()),
        op_types_to_include=tuple(op_types_to_include or ()),
        data_max=_limit(data_max),
        init_max=_limit(init_max),
        keep_io_types=keep_io_types,
        init_conversion_max_bytes=init_conversion_max_bytes,
        max_depth_of_reduction=max_depth_of_reduction,
        opset=opset,
        custom_ops=(*tuple(custom_ops or ()), *tuple(trt_plugins_precision)),
        node_precisions=tuple((str(k), str(v)) for k, v in pairs),
        fp32_accumulation=fp32_accumulation,
        respect_existing_types=respect_existing_types,
        respect_fp32_casts=respect_fp32_casts,
        target=target,
        fp32_island_min_flops=fp32_island_min_flops,
    )
    reference = ReferenceData(
        calibration_data=calibration_data,
        input_shapes=input_shapes,
        providers=tuple(providers),
        trt_plugins=tuple(trt_plugins),
        seed=seed,
    )
    return convert_path(onnx_path, options=options, reference=reference).model


def _limit(value: float | None) -> float:
    """AutoCast's None threshold means no limit (inf); anything else (numpy scalars included) is checked and
    made a float by the options."""
    return math.inf if value is None else value


def convert_path(
    source: str | Path | onnx.ModelProto,
    *,
    options: ConvertOptions,
    reference: ReferenceData,
    weights: Literal["all", "lazy"] = "all",
) -> ConversionResult:
    """Load, run the reference pass unless data_max is inf (as AutoCast does), and convert.

    ``weights="lazy"`` (the CLI) keeps a file's big weights on disk: the result is then a lazy model (its
    ``base_dir`` is the source's folder) that :func:`harness.data.onnxsave.save_model` converts while writing.
    """
    base_dir = None if isinstance(source, onnx.ModelProto) else Path(source).parent
    model = source if isinstance(source, onnx.ModelProto) else load_model(Path(source), weights=weights)
    magnitudes = None if math.isinf(options.data_max) else _reference_run(model, reference, base_dir)
    shapes = None if reference.input_shapes is None else concrete_inputs(model, reference.input_shapes)
    return convert(model, options=options, magnitudes=magnitudes, base_dir=base_dir, shapes=shapes)


_WITHOUT = (
    "converting without magnitudes (no data_max rule, no graph I/O range check); give calibration_data "
    "with valid values to use them"
)


def _reference_run(model: onnx.ModelProto, reference: ReferenceData, base_dir: Path | None) -> Magnitudes | None:
    """Magnitudes from one onnxruntime run, or None (with a warning) where random data cannot stand for the
    model: inputs it cannot hold (sequences, optionals, float8/int4...: no run), or a model onnxruntime loads but
    cannot run on random data (a data problem, such as integer inputs feeding shape-like parameters, not an op it
    lacks). Dynamic dims nobody sized take ``reference.dynamic_default`` (one warning names them); where
    onnxruntime cannot run those sizes (dims that must agree but share no name), the run is repeated once with
    them at 1, as AutoCast sizes every dim, and a warning says so."""
    fallback = False
    if reference.calibration_data is None:
        unholdable = unholdable_inputs(model)
        if unholdable:
            LOG.warning(
                "random reference data cannot hold inputs %s: %s",
                ", ".join(f"{k} ({v})" for k, v in unholdable.items()),
                _WITHOUT,
            )
            return None
        shape_like = shape_like_inputs(model)
        if shape_like:
            LOG.warning(
                "random reference data cannot invent valid values for integer inputs feeding shape-like "
                "parameters (%s): %s",
                "; ".join(f"{k}: {v}" for k, v in shape_like.items()),
                _WITHOUT,
            )
            return None
        plan = sized_inputs(model, input_shapes=reference.input_shapes, dynamic_default=reference.dynamic_default)
        warning = dynamic_dims_warning(plan, dynamic_default=reference.dynamic_default or 1)
        if warning is not None:
            LOG.warning("%s", warning)
        fallback = any(not d.batch and d.size > 1 for d in plan.defaulted)
    LOG.info("running onnxruntime once to collect tensor magnitudes")
    try:
        magnitudes = _collect(model, reference, base_dir, reference.dynamic_default)
    except ReferenceRunError as err:
        if reference.calibration_data is not None or err.stage != "run":
            raise
        said = err.problem.splitlines()[0][:300]
        if not fallback:
            LOG.warning(
                "onnxruntime loads this model but fails to run it on random data (a data problem, not an op "
                "it lacks): %s. onnxruntime said: %s",
                _WITHOUT,
                said,
            )
            return None
        LOG.warning(
            "onnxruntime cannot run the model with those default sizes (dims that must agree but share no "
            "name?): running it again with every unsized dim at 1, as AutoCast does, so sums along them are "
            "understated; give --input_shapes or calibration data. onnxruntime said: %s",
            said,
        )
        try:
            magnitudes = _collect(model, reference, base_dir, 1)
        except ReferenceRunError as again:
            if again.stage != "run":
                raise
            LOG.warning(
                "onnxruntime fails to run the model on random data at those sizes too: %s. onnxruntime said: %s",
                _WITHOUT,
                again.problem.splitlines()[0][:300],
            )
            return None
    LOG.info("reference data: %s", magnitudes.data_source)
    return magnitudes


def _collect(
    model: onnx.ModelProto, reference: ReferenceData, base_dir: Path | None, dynamic_default: int | None
) -> Magnitudes:
    return reference_run(model, replace(reference, dynamic_default=dynamic_default), base_dir=base_dir).magnitudes
