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
from dataclasses import dataclass
from typing import Any

from harness.core.providers import CPU, CUDA

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
    "castguard_shard": "shard",
    "castguard_trt_build_check": "trt_build_check",
    "castguard_diagnose": "diagnose",
    "castguard_candidates": "candidates",
    "castguard_runner_options": "runner_options",
    "castguard_runner_timeout": "runner_timeout",
    "castguard_xfail": "xfail",
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
    "castguard_converters": "converters",
    "castguard_fp32_casts": "fp32_casts",
}
SWEEP_FILE_DEST = "castguard_sweep_file"


@dataclass(frozen=True)
class Option:
    """One command-line option of the plugin and the CLI.

    Its default is always None ("not given"), so that pyproject can supply it; the help text is :data:`HELP`'s.
    """

    flag: str
    dest: str
    metavar: str | None = None
    action: str | None = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None

    @property
    def takes_value(self) -> bool:
        """Whether the option reads the next argument as its value (``--model PATH``), unlike a switch."""
        return self.action not in ("store_true", "store_false")

    def register(
        self, addoption: Callable[..., Any], *, flags: tuple[str, ...] | None = None, help: str | None = None
    ) -> None:
        """``addoption(*flags, ...)``: the option under ``flags`` (default: its own flag), with ``help`` (default:
        :data:`HELP`'s text)."""
        extra = {
            k: v
            for k, v in (
                ("metavar", self.metavar),
                ("action", self.action),
                ("type", self.type),
                ("choices", self.choices),
            )
            if v is not None
        }
        text = HELP[self.flag] if help is None else help
        addoption(*(flags or (self.flag,)), dest=self.dest, default=None, help=text, **extra)


PREFIX = "--castguard-"  # every option's namespaced form in pytest (--castguard-model), like --benchmark-*


def prefixed(flag: str) -> str:
    """The namespaced form of a flag: ``--model`` -> ``--castguard-model``."""
    return PREFIX + flag.removeprefix("--")


MODEL_OPTIONS: tuple[Option, ...] = (  # what to check and with which inputs
    Option("--model", "castguard_models", metavar="[KEY=]NAME|PATH", action="append"),
    Option("--runner", "castguard_runners", metavar="ort|ort-cuda|emulate|reference|trt|PLUGIN", action="append"),
    Option("--goldens-dir", "castguard_goldens_dir", metavar="DIR"),
    Option("--update-goldens", "castguard_update_goldens", action="store_true"),
    Option("--val-range", "castguard_val_ranges", metavar="NAME:[lo,hi]", action="append"),
    Option("--input-shapes", "castguard_input_shapes", metavar="NAME:1x3x224x224", action="append"),
    Option("--inputs", "castguard_inputs", metavar="[KEY=]FILE", action="append"),
    Option("--candidate", "castguard_candidates", metavar="KEY=FILE", action="append"),
    Option("--seed", "castguard_seed", metavar="N", type=int),
    Option("--iterations", "castguard_iterations", metavar="N", type=int),
    Option("--ort-providers", "castguard_ort_providers", metavar="P1,P2"),
    Option("--runner-option", "castguard_runner_options", metavar="NAME:key=value", action="append"),
    Option("--runner-timeout", "castguard_runner_timeout", metavar="SECONDS", type=float),
)


SWEEP_OPTIONS: tuple[Option, ...] = (  # the sweep's axes ([tool.castguard.sweep])
    Option("--sweep", SWEEP_FILE_DEST, metavar="FILE"),
    Option("--precision", "castguard_precision", metavar="fp16,bf16"),
    Option("--data-max", "castguard_data_max", metavar="8,512,inf"),
    Option("--init-max", "castguard_init_max", metavar="65504"),
    Option("--exclude-ops", "castguard_exclude_ops", metavar="none,sensitive,NAME=Op1+Op2", action="append"),
    Option("--keep-io-types", "castguard_keep_io_types", metavar="both|true|false"),
    Option("--node-precisions", "castguard_node_precisions", metavar="Add:fp16,Sub:fp32"),
    Option("--fp32-accumulation", "castguard_fp32_accumulation", action="store_true"),
    Option("--target", "castguard_target", choices=("any", "ort-cuda", "tensorrt")),
    Option("--converter", "castguard_converters", metavar="castguard|ort-fp16|autocast|PLUGIN", action="append"),
    Option("--fp32-casts", "castguard_fp32_casts", metavar="respect,ignore"),
)


RUN_OPTIONS: tuple[Option, ...] = (  # where the run writes, and the tuned case
    Option("--report-dir", "castguard_report_dir", metavar="DIR"),
    Option("--tune", "castguard_tune", action="store_true"),
    Option("--cache-dir", "castguard_cache_dir", metavar="DIR"),
    Option("--keep-runs", "castguard_keep_runs", metavar="N", type=int),
    Option("--cache-max-mb", "castguard_cache_max_mb", metavar="MB", type=int),
    Option("--shard", "castguard_shard", metavar="K/N"),
    Option("--trt-build-check", "castguard_trt_build_check", action="store_true"),
    Option("--no-trt-build-check", "castguard_trt_build_check", action="store_false"),
    Option("--no-diagnose", "castguard_diagnose", action="store_false"),
    Option("--xfail", "castguard_xfail", metavar="PATTERN", action="append"),
)


VERDICT_OPTIONS: tuple[Option, ...] = (  # how the pytest run's exit status is decided (command line only)
    Option("--allow-skipped-runner", "castguard_allow_skipped_runner", action="store_true"),
)


NIGHTLY_OPTIONS: tuple[Option, ...] = (  # nightly regression (command line only)
    Option("--baseline", "castguard_baseline", metavar="PATH"),
    Option("--fail-on-regression", "castguard_fail_on_regression", metavar="RULES", action="append"),
    Option("--history", "castguard_history", metavar="DIR"),
    Option("--strict-provenance", "castguard_strict_provenance", action="store_true"),
)


HELP: Mapping[str, str] = {  # --flag -> help text (see the tables below)
    "--model": "ONNX model to check (repeatable). A bare name such as mnist or mnist.onnx is looked up in "
    "castguard's bundled test_models/. KEY=PATH names the model (its goldens go to goldens/KEY/). With "
    "--model and no test paths, pytest runs the accuracy suite only.",
    "--runner": "runner for the low-precision model (default emulate, or [tool.castguard.sweep] runners; repeatable "
    "or comma-separated). Only emulate, reference, trt, ort-cuda and GPU ort really round"
    " fp16/bf16. An installed runner plugin (entry-point group castguard.runners) is chosen by its name.",
    "--runner-option": "an option for runner plugin NAME (repeatable): --runner-option myrunner:device=1; the plugin is "
    "built with options={key: value} ([tool.castguard] runner_options = {NAME = {key = value}})",
    "--runner-timeout": "seconds a runner plugin run in its child process may take before it counts as hung (default fitted: "
    "fitted to the model: 60 s + 100 x one measured FP32 forward per feed; [tool.castguard] runner_timeout)",
    "--goldens-dir": "where FP32 goldens live (default: goldens/ in the project folder)",
    "--update-goldens": "rewrite the FP32 goldens of the selected models; each rewritten golden fails its test once",
    "--val-range": "value range for random inputs, Polygraphy syntax (repeatable); [lo,hi] without a name applies to "
    "every input. Default [-1,1] for floats; integers that index a Gather table are drawn from its rows, "
    "shape-like integers must be given, other integers default to [0,1] (stated).",
    "--input-shapes": "shapes of inputs with dynamic dimensions (repeatable, or a comma list x:1x3x224x224,mask:1x128; "
    "Polygraphy's x:[1,3,224,224] too). Dims sharing a dim_param take the same size; a leading dynamic "
    "dim defaults to 1 (stated); any other dynamic dim must be given",
    "--inputs": "input feeds: an .npz (a leading dim that is k x the model's batch gives k iterations), a folder of "
    ".npz or a Polygraphy --save-inputs .json; replaces random inputs. KEY=FILE (repeatable): the inputs of "
    "the model with that key only, in a run over several models",
    "--seed": "seed for random inputs (default 0)",
    "--iterations": "number of random feeds (default 1)",
    "--ort-providers": f"execution providers for --runner ort, e.g. {CUDA},{CPU} (default {CPU}; goldens always use CPU)",
    "--sweep": "TOML file with sweep settings at top level (the keys of [tool.castguard.sweep]); overrides "
    "pyproject, and is overridden by the options below",
    "--precision": "low precisions to sweep (default fp16,bf16)",
    "--data-max": "data_max thresholds to sweep: nodes whose inputs/outputs exceed it stay fp32 (inf: rule off) "
    "(default 8,512,inf)",
    "--init-max": "init_max thresholds to sweep: initializers above it stay fp32 (default 65504)",
    "--exclude-ops": "op-exclusion sets to sweep (repeatable or comma-separated): none, sensitive (Softmax, "
    "LayerNormalization, GroupNormalization, InstanceNormalization, ReduceMean, Pow), a set from [tool.castguard.sweep.exclusion_sets], or a new one"
    " as NAME=Op1+Op2",
    "--keep-io-types": "sweep keep_io_types: both, or one value for every case (default false: the model's own inputs and "
    "outputs become fp16/bf16)",
    "--node-precisions": "force nodes (by name or op type) to a precision in every case, like Polygraphy's --layer-precisions;"
    " a key that matches nothing is an error",
    "--fp32-accumulation": "wrap each low-precision MatMul/Gemm as Cast -> fp32 MatMul -> Cast in every case",
    "--converter": "converter of the sweep (default castguard, or [tool.castguard.sweep] converters; repeatable): "
    "castguard, ort-fp16 (onnxruntime's transformer optimizer + convert_float_to_float16), autocast (NVIDIA ModelOpt, "
    'pip install "castguard[autocast]") or an installed converter plugin (entry-point group castguard.converters); '
    "settings a converter does not take are not swept for it",
    "--candidate": "a model you converted yourself, judged against --model KEY's FP32 golden on every runner "
    "(KEY=FILE, repeatable; [tool.castguard] candidates = {KEY = FILE}); its inputs and outputs must match the FP32 model's",
    "--target": "convert every case for this deployment target (castguard convert --target): ops with no fp16/bf16 "
    "kernel there stay FP32 (default any)",
    "--fp32-casts": "sweep the model's own Casts to FP32 (an exporter's x.to(float32)): respect (their readers stay "
    "FP32), ignore (castguard convert --ignore_fp32_casts), or both as respect,ignore (default respect)",
    "--report-dir": "where the sweep report (report.json, report.md, report.html, outputs/) is written at the end of the "
    "run (default: castguard-report/ in the project folder)",
    "--tune": "add a `tuned` case per precision: castguard tune's plan (fewest FP32 nodes within the max-error "
    "bound, on emulate), checked against the plan stored beside the goldens ([tool.castguard] tune)",
    "--cache-dir": "content-hash cache of magnitudes and converted models (default: .castguard-cache/ in the project "
    "folder); safe to delete at any time",
    "--keep-runs": "finished run folders (runs/<id>/ with their saved outputs) kept in the report folder; older ones are"
    " deleted at the end of a run (default 3)",
    "--cache-max-mb": "size cap of the cache folder; least recently used entries are evicted at the end of a run (default "
    "2048; 0: no cap). `castguard cache` shows and prunes it",
    "--shard": "run only shard K of N of the models (assigned by a stable hash of each model key; a model's cases are "
    "split too only when there are fewer models than shards); merge the shards' report folders with "
    "`castguard merge` ([tool.castguard] shard)",
    "--trt-build-check": "build every distinct converted model as a strongly typed TensorRT engine and check its layer types (the "
    'default when TensorRT or TensorRT-RTX is installed: pip install "castguard[trt]"; no GPU needed); an '
    "error when neither is installed ([tool.castguard] trt_build_check)",
    "--no-trt-build-check": "skip the TensorRT build check even when TensorRT is installed",
    "--no-diagnose": "do not diagnose failing cases (no divergence profile, no verified fix): the costliest step of a "
    "failing case on a large model; the failure message says it was skipped ([tool.castguard] diagnose = false)",
    "--xfail": "mark sweep cases as expected to fail (repeatable; fnmatch over the case id or <model>-<case id>, e.g. "
    "'*-dmaxinf-*'); added to [tool.castguard] xfail. They are recorded as xfail, or xpass when they pass, and do "
    "not keep a night from being a baseline",
    "--allow-skipped-runner": "accept a run in which every case of a runner you asked for by name (--runner, [tool.castguard] runners "
    "or the sweep's runners) skipped, e.g. ort-cuda without CUDA; without it such a run exits 1 and says why",
    "--baseline": "compare this run with a previous report.json (or report folder), or with the latest clean run of a "
    "--history folder; regressions, improvements, new and missing cases go into the report",
    "--fail-on-regression": "fail the run when a case regresses past a rule (comma-separated, repeatable): max_rel:+25%%, "
    "max_abs:+0.01, error:+25%%, over_tol:+25%%, median_rel:+25%%, lowp_share:-2pp, top_token:-1pp, kl:+50%%, casts:+2, "
    "speedup:-10%% (GPU runners), convert_time:+50%%, infer_time:+50%%, total_time:+50%%, status, trt_build",
    "--history": "store this run (report + provenance) as one JSON file in DIR; report.html then shows trends over the"
    " last runs (castguard history DIR prints them)",
    "--strict-provenance": "a golden made with another onnx/onnxruntime version than this run is an error, not a note",
}


def add_options(addoption: Callable[..., Any]) -> None:
    """Register castguard's options with ``addoption`` (pytest group) or ``add_argument`` (argparse)."""
    for option in (*MODEL_OPTIONS, *SWEEP_OPTIONS, *RUN_OPTIONS):
        option.register(addoption)


def add_nightly_options(addoption: Callable[..., Any]) -> None:
    """The pytest plugin's command-line-only options: nightly regression (:mod:`harness.nightly.run`) and
    --allow-skipped-runner (:mod:`harness.conductor`)."""
    for option in (*NIGHTLY_OPTIONS, *VERDICT_OPTIONS):
        option.register(addoption)


PLUGIN_OPTIONS: tuple[Option, ...] = (*MODEL_OPTIONS, *SWEEP_OPTIONS, *RUN_OPTIONS, *NIGHTLY_OPTIONS, *VERDICT_OPTIONS)
"""Every option of the pytest plugin: each is registered as ``--castguard-NAME`` and, where no other plugin or
conftest owns it, as ``--NAME`` too (:mod:`harness.plugin.aliases`)."""


def options_given(namespace: Any) -> bool:
    """Whether any castguard option was given on a parsed namespace (every default is None: "not given")."""
    return any(getattr(namespace, option.dest, None) is not None for option in PLUGIN_OPTIONS)


def given_options(namespace: Any) -> dict[str, Any]:
    """The castguard options present on a parsed namespace (pytest ``config.option`` or argparse), by dest."""
    return {dest: getattr(namespace, dest, None) for dest in (*DESTS, *SWEEP_DESTS, SWEEP_FILE_DEST)}
