"""Command-line options, defined once for the pytest plugin and the ``castguard`` CLI (pytest-benchmark style).

``add_options(parser.getgroup("castguard").addoption)`` in the plugin and ``add_options(parser.add_argument)``
in the CLI. Every default is ``None`` ("not given") so that ``[tool.castguard]`` in pyproject.toml can supply
it; :meth:`harness.config.HarnessConfig.from_sources` merges the two.

Three groups of options, by where their pyproject default lives:

* :data:`DESTS`: keys of ``[tool.castguard]`` (``runners`` there is the lowest layer of the sweep's runner axis);
* :data:`SWEEP_DESTS`: the sweep axes of ``[tool.castguard.sweep]`` (a ``--sweep FILE`` sits between the two);
* :data:`SWEEP_FILE_DEST`: ``--sweep FILE`` itself.
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
    "castguard_report_dir": "report_dir",
    "castguard_cache_dir": "cache_dir",
    "castguard_keep_runs": "keep_runs",
    "castguard_cache_max_mb": "cache_max_mb",
    "castguard_tune": "tune",
}
# dest -> harness.sweep.SweepOptions field (the pyproject side is [tool.castguard.sweep]).
SWEEP_DESTS: Mapping[str, str] = {
    "castguard_precision": "precision",
    "castguard_data_max": "data_max",
    "castguard_init_max": "init_max",
    "castguard_exclude_ops": "exclude_ops",
    "castguard_keep_io_types": "keep_io_types",
    "castguard_node_precisions": "node_precisions",
    "castguard_fp32_accumulation": "fp32_accumulation",
    "castguard_target": "target",
}
SWEEP_FILE_DEST = "castguard_sweep_file"


def add_options(addoption: Callable[..., Any]) -> None:
    """Register castguard's options with ``addoption`` (pytest group) or ``add_argument`` (argparse)."""
    _add_model_options(addoption)
    _add_sweep_options(addoption)
    addoption("--report-dir", dest="castguard_report_dir", default=None, metavar="DIR",
              help="where the sweep report (report.json, report.md, report.html, outputs/) is written at the end "
                   "of the run (default: castguard-report/ in the project folder)")
    addoption("--tune", dest="castguard_tune", action="store_true", default=None,
              help="add a `tuned` case per precision: castguard tune's plan (fewest FP32 nodes within the max-error "
                   "bound, on emulate), checked against the plan stored beside the goldens ([tool.castguard] tune)")
    addoption("--cache-dir", dest="castguard_cache_dir", default=None, metavar="DIR",
              help="content-hash cache of magnitudes and converted models (default: .castguard-cache/ in the "
                   "project folder); safe to delete at any time")
    addoption("--keep-runs", dest="castguard_keep_runs", type=int, default=None, metavar="N",
              help="finished run folders (runs/<id>/ with their saved outputs) kept in the report folder; older "
                   "ones are deleted at the end of a run (default 3)")
    addoption("--cache-max-mb", dest="castguard_cache_max_mb", type=int, default=None, metavar="MB",
              help="size cap of the cache folder; least recently used entries are evicted at the end of a run "
                   "(default 2048; 0: no cap). `castguard cache` shows and prunes it")


def _add_model_options(addoption: Callable[..., Any]) -> None:
    addoption("--model", dest="castguard_models", action="append", default=None, metavar="[KEY=]NAME|PATH",
              help="ONNX model to check (repeatable). A bare name such as mnist or mnist.onnx is looked up in "
                   "castguard's bundled test_models/. KEY=PATH names the model (its goldens go to goldens/KEY/). "
                   "With --model and no test paths, pytest runs the accuracy suite only.")
    addoption("--runner", dest="castguard_runners", action="append", default=None,
              metavar="ort|emulate|reference|trt",
              help="runner for the low-precision model (repeatable or comma-separated; default from "
                   "[tool.castguard.sweep] runners, else emulate). Only emulate, reference, trt and GPU ort "
                   "really round fp16/bf16.")
    addoption("--goldens-dir", dest="castguard_goldens_dir", default=None, metavar="DIR",
              help="where FP32 goldens live (default: goldens/ in the project folder)")
    addoption("--update-goldens", dest="castguard_update_goldens", action="store_true", default=None,
              help="rewrite the FP32 goldens of the selected models; each rewritten golden fails its test once")
    addoption("--val-range", dest="castguard_val_ranges", action="append", default=None,
              metavar="NAME:[lo,hi]",
              help="value range for random inputs, Polygraphy syntax (repeatable); [lo,hi] without a name "
                   "applies to every input. Default [-1,1] for floats; integers that index a Gather table are drawn "
                   "from its rows, shape-like integers must be given, other integers default to [0,1] (stated).")
    addoption("--input-shapes", dest="castguard_input_shapes", action="append", default=None,
              metavar="NAME:1x3x224x224", help="shapes of inputs with dynamic dimensions (repeatable, or a comma "
                                               "list x:1x3x224x224,mask:1x128; Polygraphy's x:[1,3,224,224] too). "
                                               "Dims sharing a dim_param take the same size; a leading dynamic "
                                               "dim defaults to 1 (stated); any other dynamic dim must be given")
    addoption("--inputs", dest="castguard_inputs", default=None, metavar="FILE",
              help="input feeds: an .npz (a leading dim that is k x the model's batch gives k iterations), a "
                   "folder of .npz or a Polygraphy --save-inputs .json; replaces random inputs")
    addoption("--seed", dest="castguard_seed", type=int, default=None, help="seed for random inputs (default 0)")
    addoption("--iterations", dest="castguard_iterations", type=int, default=None,
              help="number of random feeds (default 1)")
    addoption("--ort-providers", dest="castguard_ort_providers", default=None, metavar="P1,P2",
              help="execution providers for --runner ort, e.g. CUDAExecutionProvider,CPUExecutionProvider "
                   "(default CPUExecutionProvider; goldens always use CPU)")


def _add_sweep_options(addoption: Callable[..., Any]) -> None:
    addoption("--sweep", dest=SWEEP_FILE_DEST, default=None, metavar="FILE",
              help="TOML file with sweep settings at top level (the keys of [tool.castguard.sweep]); overrides "
                   "pyproject, and is overridden by the options below")
    addoption("--precision", dest="castguard_precision", default=None, metavar="fp16,bf16",
              help="low precisions to sweep (default fp16,bf16)")
    addoption("--data-max", dest="castguard_data_max", default=None, metavar="8,512,inf",
              help="data_max thresholds to sweep: nodes whose inputs/outputs exceed it stay fp32 (inf: rule off)")
    addoption("--init-max", dest="castguard_init_max", default=None, metavar="65504",
              help="init_max thresholds to sweep: initializers above it stay fp32")
    addoption("--exclude-ops", dest="castguard_exclude_ops", action="append", default=None,
              metavar="none,sensitive,NAME=Op1+Op2",
              help="op-exclusion sets to sweep (repeatable or comma-separated): none, sensitive (Softmax, "
                   "LayerNormalization, ReduceMean, Pow), a set from [tool.castguard.sweep.exclusion_sets], or a "
                   "new one as NAME=Op1+Op2")
    addoption("--keep-io-types", dest="castguard_keep_io_types", default=None, metavar="both|true|false",
              help="sweep keep_io_types (default both)")
    addoption("--node-precisions", dest="castguard_node_precisions", default=None, metavar="Add:fp16,Sub:fp32",
              help="force nodes (by name or op type) to a precision in every case, like Polygraphy's "
                   "--layer-precisions; a key that matches nothing is an error")
    addoption("--fp32-accumulation", dest="castguard_fp32_accumulation", action="store_true", default=None,
              help="wrap each low-precision MatMul/Gemm as Cast -> fp32 MatMul -> Cast in every case")
    addoption("--target", dest="castguard_target", default=None, choices=("any", "ort-cuda", "tensorrt"),
              help="convert every case for this deployment target (castguard convert --target): ops with no "
                   "fp16/bf16 kernel there stay FP32 (default any)")


def add_nightly_options(addoption: Callable[..., Any]) -> None:
    """The nightly-regression options of the pytest plugin (command line only; see :mod:`harness.nightly.run`)."""
    addoption("--baseline", dest="castguard_baseline", default=None, metavar="PATH",
              help="compare this run with a previous report.json (or report folder), or with the latest clean run "
                   "of a --history folder; regressions, improvements, new and missing cases go into the report")
    addoption("--fail-on-regression", dest="castguard_fail_on_regression", action="append", default=None,
              metavar="RULES", help="fail the run when a case regresses past a rule (comma-separated, repeatable): "
                                    "max_rel:+25%%, max_abs:+0.01, error:+25%%, median_rel:+25%%, lowp_share:-2pp, "
                                    "casts:+2, speedup:-10%% (GPU runners), convert_time:+50%%, infer_time:+50%%, "
                                    "total_time:+50%%, status")
    addoption("--history", dest="castguard_history", default=None, metavar="DIR",
              help="store this run (report + provenance) as one JSON file in DIR; report.html then shows trends "
                   "over the last runs (castguard history DIR prints them)")
    addoption("--strict-provenance", dest="castguard_strict_provenance", action="store_true", default=None,
              help="a golden made with another onnx/onnxruntime version than this run is an error, not a note")


def given_options(namespace: Any) -> dict[str, Any]:
    """The castguard options present on a parsed namespace (pytest ``config.option`` or argparse), by dest."""
    return {dest: getattr(namespace, dest, None) for dest in (*DESTS, *SWEEP_DESTS, SWEEP_FILE_DEST)}
