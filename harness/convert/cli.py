"""``python -m harness.convert`` / ``castguard convert``: AutoCast's command line, flag for flag.

``main(argv)`` returns the converted ModelProto (as AutoCast's does); the console script runs ``console(argv)``.
Exit codes: 0 converted and saved; 2 bad input (a message naming the problem and the fix, no
traceback, no output file left behind).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import onnx

from harness.convert.api import DEFAULT_DATA_MAX, DEFAULT_INIT_MAX, convert_path
from harness.convert.options import TARGETS, ConvertOptions, parse_node_precisions
from harness.convert.reference import ReferenceData
from harness.core.argv import ArgumentParser
from harness.core.console import Console, add_console_options
from harness.core.errors import INTERRUPTED_EXIT, ConversionError, UserError
from harness.data.onnxfile import is_lazy, load_model
from harness.data.onnxsave import save_model
from harness.data.recipes import parse_input_shapes

LOG = logging.getLogger("harness.convert")
_NAME_LISTS = {
    "nodes_to_exclude": (
        "-ne",
        "node-name regexes kept FP32 (re.match: anchored at the start; use .*name.* for substrings)",
    ),
    "op_types_to_exclude": ("-ope", "op types kept FP32 (exact names)"),
    "nodes_to_include": ("-ni", "node-name regexes forced to low precision (override exclusions; not schema limits)"),
    "op_types_to_include": ("-opi", "op types forced to low precision"),
}
"""The flags that list node names or op types (flag and option named alike): short flag, help."""
_AS_GIVEN = (
    *("low_precision_type", "data_max", "init_max", "keep_io_types", "init_conversion_max_bytes"),
    *("max_depth_of_reduction", "opset", "fp32_accumulation", "respect_existing_types", "target"),
    "fp32_island_min_flops",
)
"""The options set, as parsed, by the flag of the same name."""


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="castguard convert",
        description="Convert an FP32 ONNX model to mixed FP32-FP16/BF16. Accepts ModelOpt AutoCast 0.47's flags "
        "verbatim; nodes stay FP32 when excluded, when their data/initializers exceed the thresholds, "
        "when their schema lacks the low type, or when a reduction is too deep.",
    )
    add = parser.add_argument
    add("--onnx_path", required=True, help="input FP32 ONNX model")
    add("--output_path", help="output path (default: <onnx_path stem>.fp16.onnx or .bf16.onnx beside the input)")
    add("--low_precision_type", "-t", choices=["fp16", "bf16"], default="fp16", help="low precision type")
    add(
        "--calibration_data",
        "-d",
        help="reference data: .npz (keys = input names), a folder of .npz, or a "
        "Polygraphy --save-inputs JSON; default random data in [-1, 1]",
    )
    for name, (short, what) in _NAME_LISTS.items():
        add(f"--{name}", short, nargs="*", default=[], help=what)
    add(
        "--data_max",
        type=float,
        default=DEFAULT_DATA_MAX,
        help="keep a node FP32 when an input/output |x| exceeds this (float tensors; inf skips the reference run)",
    )
    add(
        "--init_max",
        type=float,
        default=DEFAULT_INIT_MAX,
        help="keep a node FP32 when an FP32 initializer |x| exceeds this",
    )
    add(
        "--init_conversion_max_bytes",
        type=int,
        default=None,
        help="initializers larger than this stay FP32 in the file and get a runtime Cast",
    )
    add(
        "--max_depth_of_reduction",
        type=int,
        default=None,
        help="keep MatMul/Gemm/Conv/reductions FP32 when more terms than this are summed per output",
    )
    add("--keep_io_types", action="store_true", help="keep every graph input and output in its original type")
    add("--log_level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="log level")
    add(
        "--providers",
        nargs="+",
        default=["cpu"],
        help="onnxruntime providers for the reference run: cpu, cuda:N, trt, dml",
    )
    add("--trt_plugins", nargs="+", default=[], help="TensorRT plugin libraries (.so) for the trt provider")
    add("--trt_plugins_precision", nargs="+", default=[], help="custom op precisions, OP:fp16|bf16|fp32")
    add("--opset", type=int, default=None, help="minimum opset (default 13 for fp16, 22 for bf16; never lowered)")
    add("--use_standalone_type_inference", action="store_true", help="accepted for AutoCast compatibility (no-op)")
    add("--custom_ops", nargs="+", default=[], help="custom (non-ONNX) op types, optionally OP:fp16|bf16|fp32")
    add(
        "--node_precisions",
        default="",
        help="explicit per-node precisions by node name or op type, "
        "e.g. Add:fp16,Sub:fp32 (wins over every other rule)",
    )
    add(
        "--fp32_accumulation",
        action="store_true",
        help="wrap each low-precision MatMul/Gemm as Cast->fp32 MatMul->Cast (fp32 accumulation in TensorRT)",
    )
    add(
        "--respect_existing_types",
        action="store_true",
        help="keep the model's explicit types: fp16/bf16 nodes stay, fp32 nodes stay unless included, graph "
        "I/O keeps its types",
    )
    add(
        "--ignore_fp32_casts",
        action="store_true",
        help="ignore Casts to FLOAT of tensors that are already FLOAT (the author's softmax(dtype=float32), "
        ".float()): their readers follow the other rules, for the fewest casts. By default they stay FP32",
    )
    add(
        "--target",
        choices=list(TARGETS),
        default="any",
        help="where the model will run: any (every op the schema allows goes low), ort-cuda (ops with no "
        "fp16/bf16 CUDA kernel in onnxruntime-gpu stay FP32; probed table) or tensorrt (documented table)",
    )
    add(
        "--fp32_island_min_flops",
        type=int,
        default=4096,
        help="a group of FP32 nodes below this many FLOPs becomes low unless a rule requires FP32 (0: off)",
    )
    add(
        "--input_shapes",
        "--input-shapes",
        default="",
        help="shapes for random data, e.g. x:1x3x224x224,mask:1x128 (Polygraphy's x:[1,3,224,224] too); inputs "
        "sharing a dim name take the same size. Dims nobody gives: castguard convert sets a leading dynamic dim "
        "to 1 and others to 128 (one warning names them); castguard tune refuses all but the batch",
    )
    add("--seed", type=int, default=0, help="seed for random reference data")
    add("--force", action="store_true", help="allow the output path to overwrite the input model")
    add_console_options(parser)
    return parser


def _shapes(text: str) -> dict[str, tuple[int, ...]]:
    """``--input_shapes``, parsed as ``pytest --input-shapes`` is (:func:`harness.data.recipes.parse_input_shapes`)."""
    return dict(parse_input_shapes(text)) if text.strip() else {}


def output_path(args: argparse.Namespace) -> Path:
    source = Path(args.onnx_path)
    if args.output_path:
        target = Path(args.output_path)
    else:
        stem = source.name[: -len(".onnx")] if source.name.endswith(".onnx") else source.name
        target = source.with_name(f"{stem}.{args.low_precision_type}.onnx")
    if target.resolve() == source.resolve() and not args.force:
        raise ConversionError(
            where=target,
            step="options",
            problem="output path equals the input model path",
            fix="choose another --output_path, or pass --force to overwrite the input",
        )
    return target


def options_from_args(args: argparse.Namespace) -> ConvertOptions:
    """The conversion options the flags describe (shared with ``castguard tune``)."""
    same_named: dict[str, Any] = {
        **{name: getattr(args, name) for name in _AS_GIVEN},
        **{name: tuple(getattr(args, name)) for name in _NAME_LISTS},
    }
    return ConvertOptions(
        **same_named,
        custom_ops=(*args.custom_ops, *args.trt_plugins_precision),
        node_precisions=parse_node_precisions(args.node_precisions, where="--node_precisions"),
        respect_fp32_casts=not args.ignore_fp32_casts,
    )


def reference_from_args(args: argparse.Namespace) -> ReferenceData:
    """Where the reference run's data comes from (shared with ``castguard tune``)."""
    return ReferenceData(
        calibration_data=args.calibration_data,
        input_shapes=_shapes(args.input_shapes),
        providers=tuple(args.providers),
        trt_plugins=tuple(args.trt_plugins),
        seed=args.seed,
    )


def run(args: argparse.Namespace) -> tuple[onnx.ModelProto, Path]:
    target = output_path(args)
    options = options_from_args(args)
    reference = reference_from_args(args)
    result = convert_path(args.onnx_path, options=options, reference=reference, weights="lazy")
    save_model(result.model, target, base_dir=result.base_dir)
    return result.model, target


def log_level(name: str, verbosity: int) -> int:
    """``--log_level`` moved by ``-q``/``-v``: ``-q`` keeps warnings and errors, ``-qq`` errors only, each ``-v``
    one level more (INFO, then DEBUG: every node with its full reason)."""
    level = int(logging.getLevelName(name))
    if verbosity >= 0:
        return max(logging.DEBUG, level - 10 * verbosity)
    return max(level, logging.WARNING if verbosity == -1 else logging.ERROR)


def parse(argv: list[str] | None, *, lead: argparse.Namespace | None = None) -> tuple[argparse.Namespace, Console]:
    """The flags, the console they ask for (with ``lead``: the console options given before the subcommand) and
    the log set up at ``--log_level`` moved by ``-q``/``-v`` (:func:`log_level`)."""
    args = get_parser().parse_args(argv)
    out = Console.from_args(*([lead] if lead is not None else []), args)
    level = log_level(args.log_level, out.verbosity)
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s - [castguard][convert] - %(levelname)s - %(message)s",
    )
    LOG.setLevel(level)
    return args, out


def main(argv: list[str] | None = None) -> onnx.ModelProto:
    """AutoCast's ``main(argv)``: convert, save, and return the converted ``ModelProto``. Errors raise (a
    :class:`~harness.core.errors.UserError` names the problem and the fix); the console script is :func:`console`."""
    model, target = run(parse(argv)[0])
    LOG.info("Converted model saved to %s", target)
    # the CLI keeps big weights on disk (a lazy model); the caller gets the saved model whole
    return load_model(target, check=False) if is_lazy(model) else model


def console(argv: list[str] | None = None, *, lead: argparse.Namespace | None = None) -> int:
    """The command line: exit 0 when converted and saved (the last line says where: hidden only by ``-qq``), 2 on
    bad input (one message, no traceback)."""
    args, out = parse(argv, lead=lead)
    try:
        _, target = run(args)
    except UserError as err:
        out.error(f"error: {err}")
        return 2
    except KeyboardInterrupt:  # the model is written atomically: there is a whole one, or none
        out.error(
            "castguard convert: interrupted (Ctrl-C); nothing was left half-written (the model is saved atomically)"
        )
        return INTERRUPTED_EXIT
    finally:
        if argv is None:  # the process's own command: a late Ctrl-C must not turn finished work into a crash
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    out.result(f"converted model saved to {target}")
    return 0
