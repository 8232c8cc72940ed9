"""The plan a tune writes: what stays FP32 and why, what it measured, and how to replay it.

Replay: ``castguard convert`` with :meth:`Plan.convert_args` (the tune's own flags, ``--data_max`` set to the
range limit the tune used, and one exact ``--nodes_to_exclude`` regex per kept node) rebuilds the tuned model
byte for byte. AutoCast takes the same ``nodes_to_exclude`` list and ``data_max``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.convert import ConvertOptions, ReferenceData
from harness.core.jsonfile import JsonObject

SCHEMA_VERSION = 1


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class Plan:
    """See the module docstring; :meth:`to_json` is the file's content."""

    model: str
    model_sha256: str
    castguard_version: str
    low_precision_type: str
    bound: Mapping[str, object]
    kept_fp32: tuple[str, ...]
    why: Mapping[str, str]
    range_fp32: Mapping[str, str]
    """Nodes the magnitude facts (or the converter's other rules) keep FP32, with the converter's reason; no
    evaluation was spent on them."""
    candidates: int
    evaluations: int
    evaluations_cached: int
    complete: bool
    error: Mapping[str, float]
    top1: Mapping[str, float]
    lowp_flop_share: float
    all_low_error: Mapping[str, float]
    seconds: float
    data_source: str
    convert_args: tuple[str, ...]
    nodes_to_exclude: tuple[str, ...]
    adversarial: Mapping[str, object] = field(default_factory=dict)
    inputs: Mapping[str, object] = field(default_factory=dict)
    """The inputs the plan was tuned on: the tuning data and the counterexamples the hunt added."""
    rounds: tuple[Mapping[str, object], ...] = ()
    holds: bool = True
    """The final plan met the bound on every input found (False: the last hunt found one over it)."""
    default_conversion: Mapping[str, object] = field(default_factory=dict)
    """castguard convert's default conversion on the tuning inputs: its share, error/bound and whether it holds."""

    @property
    def node_precisions(self) -> str:
        """The same plan as ``--node_precisions`` (exact node names)."""
        return ",".join(f"{name}:fp32" for name in self.kept_fp32)

    def to_json(self) -> str:
        doc = {
            "castguard_plan": SCHEMA_VERSION,
            "castguard_version": self.castguard_version,
            "model": self.model,
            "model_sha256": self.model_sha256,
            "low_precision_type": self.low_precision_type,
            "bound": self.bound,
            "kept_fp32": list(self.kept_fp32),
            "why": dict(self.why),
            "range_fp32": dict(self.range_fp32),
            "candidates": self.candidates,
            "evaluations": self.evaluations,
            "evaluations_cached": self.evaluations_cached,
            "complete": self.complete,
            "error": {k: _finite(v) for k, v in self.error.items()},
            "top1": dict(self.top1),
            "lowp_flop_share": self.lowp_flop_share,
            "all_low_error": {k: _finite(v) for k, v in self.all_low_error.items()},
            "seconds": round(self.seconds, 3),
            "data": self.data_source,
            "adversarial": dict(self.adversarial),
            "holds": self.holds,
            "default_conversion": dict(self.default_conversion),
            "inputs": dict(self.inputs),
            "rounds": [dict(r) for r in self.rounds],
            "replay": {
                "castguard_convert_args": list(self.convert_args),
                "nodes_to_exclude": list(self.nodes_to_exclude),
                "node_precisions": self.node_precisions,
            },
        }
        return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def read_plan(path: Path) -> dict[str, object]:
    """A plan file's JSON (for the harness and tests)."""
    fix = "rewrite it: castguard tune (or pytest --model ... --tune --update-goldens)"
    return dict(JsonObject.read(path, what="tuned plan", fix=fix).data)


def convert_args(
    options: ConvertOptions, reference: ReferenceData, *, onnx_path: str, output_path: str
) -> tuple[str, ...]:
    """The ``castguard convert`` flags that rebuild a conversion with ``options`` from the same data."""
    args: list[str] = [
        "--onnx_path",
        onnx_path,
        "--output_path",
        output_path,
        "--low_precision_type",
        options.low_precision_type,
        "--data_max",
        repr(float(options.data_max)),
        "--init_max",
        repr(float(options.init_max)),
    ]
    for flag, values in (
        ("--nodes_to_exclude", options.nodes_to_exclude),
        ("--op_types_to_exclude", options.op_types_to_exclude),
        ("--nodes_to_include", options.nodes_to_include),
        ("--op_types_to_include", options.op_types_to_include),
        ("--custom_ops", options.custom_ops),
        ("--providers", reference.providers),
        ("--trt_plugins", reference.trt_plugins),
    ):
        if values and tuple(values) != ("cpu",):
            args += [flag, *values]
    for flag, value in (
        ("--init_conversion_max_bytes", options.init_conversion_max_bytes),
        ("--max_depth_of_reduction", options.max_depth_of_reduction),
        ("--opset", options.opset),
    ):
        if value is not None:
            args += [flag, str(value)]
    for flag, on in (
        ("--keep_io_types", options.keep_io_types),
        ("--fp32_accumulation", options.fp32_accumulation),
        ("--respect_existing_types", options.respect_existing_types),
    ):
        if on:
            args.append(flag)
    if not options.respect_fp32_casts:
        args.append("--ignore_fp32_casts")
    if options.target != "any":
        args += ["--target", options.target]
    if options.fp32_island_min_flops != ConvertOptions().fp32_island_min_flops:
        args += ["--fp32_island_min_flops", str(options.fp32_island_min_flops)]
    if options.node_precisions:
        args += ["--node_precisions", ",".join(f"{k}:{v}" for k, v in options.node_precisions)]
    if reference.calibration_data is not None:
        args += ["--calibration_data", str(reference.calibration_data)]
    if reference.input_shapes:
        args += ["--input_shapes", ",".join(f"{k}:{'x'.join(map(str, v))}" for k, v in reference.input_shapes.items())]
    if reference.seed:
        args += ["--seed", str(reference.seed)]
    return tuple(args)
