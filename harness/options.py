"""Command-line options, defined once for the pytest plugin and the ``castguard`` CLI (pytest-benchmark style).

``add_options(parser.getgroup("castguard").addoption)`` in the plugin and ``add_options(parser.add_argument)``
in the CLI. Every default is ``None`` ("not given") so that ``[tool.castguard]`` in pyproject.toml can supply
it; :meth:`harness.config.HarnessConfig.from_sources` merges the two.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# dest -> [tool.castguard] key; the merge in config.py walks this table.
DESTS: Mapping[str, str] = {
    "castguard_models": "models",
    "castguard_runners": "runners",
    "castguard_goldens_dir": "goldens_dir",
    "castguard_update_goldens": "update_goldens",
    "castguard_val_ranges": "val_ranges",
    "castguard_input_shapes": "input_shapes",
    "castguard_inputs": "inputs",
    "castguard_seed": "seed",
    "castguard_iterations": "iterations",
    "castguard_ort_providers": "ort_providers",
}


def add_options(addoption: Callable[..., Any]) -> None:
    """Register castguard's options with ``addoption`` (pytest group) or ``add_argument`` (argparse)."""
    addoption("--model", dest="castguard_models", action="append", default=None, metavar="NAME|PATH",
              help="ONNX model to check (repeatable). A bare name such as mnist or mnist.onnx is looked up in "
                   "castguard's bundled test_models/. With --model and no test paths, pytest runs the accuracy "
                   "suite only.")
    addoption("--runner", dest="castguard_runners", action="append", default=None,
              metavar="ort|emulate|reference|trt",
              help="runner for the low-precision model (repeatable; default from [tool.castguard] runners, "
                   "else emulate). Only emulate, reference, trt and GPU ort really round fp16/bf16.")
    addoption("--goldens-dir", dest="castguard_goldens_dir", default=None, metavar="DIR",
              help="where FP32 goldens live (default: goldens/ under the rootdir)")
    addoption("--update-goldens", dest="castguard_update_goldens", action="store_true", default=None,
              help="rewrite the FP32 goldens of the selected models; each rewritten golden fails its test once")
    addoption("--val-range", dest="castguard_val_ranges", action="append", default=None,
              metavar="NAME:[lo,hi]",
              help="value range for random inputs, Polygraphy syntax (repeatable); [lo,hi] without a name "
                   "applies to every input. Default [-1,1] for floats, [0,1] for integers.")
    addoption("--input-shapes", dest="castguard_input_shapes", action="append", default=None,
              metavar="NAME:1x3x224x224", help="shape for an input with dynamic dimensions (repeatable); "
                                               "dynamic dimensions default to 1")
    addoption("--inputs", dest="castguard_inputs", default=None, metavar="FILE",
              help="input feeds: an .npz (a leading dim that is k x the model's batch gives k iterations) or a "
                   "Polygraphy --save-inputs .json; replaces random inputs")
    addoption("--seed", dest="castguard_seed", type=int, default=None, help="seed for random inputs (default 0)")
    addoption("--iterations", dest="castguard_iterations", type=int, default=None,
              help="number of random feeds (default 1)")
    addoption("--ort-providers", dest="castguard_ort_providers", default=None, metavar="P1,P2",
              help="execution providers for --runner ort, e.g. CUDAExecutionProvider,CPUExecutionProvider "
                   "(default CPUExecutionProvider; goldens always use CPU)")


def given_options(namespace: Any) -> dict[str, Any]:
    """The castguard options present on a parsed namespace (pytest ``config.option`` or argparse), by dest."""
    return {dest: getattr(namespace, dest, None) for dest in DESTS}
