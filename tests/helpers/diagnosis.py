"""Run a diagnosis on a model built in code, and run its printed commands (not a test module)."""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.data.feeds import cast_feeds, input_specs
from harness.diagnose import Diagnosis, FailedCase, diagnose_failure
from harness.judge.paired import judge_outputs
from harness.judge.tolerances import TolerancePolicy
from harness.runners import make_runner
from harness.tune.oracle import plan_options
from tests.helpers.graphs import save

REPO = Path(__file__).resolve().parents[2]
Feeds = list[dict[str, np.ndarray]]


def diagnose(
    model: onnx.ModelProto, feeds: Feeds, options: ConvertOptions, folder: Path, *, budget: int = 8
) -> tuple[Diagnosis, Path, Feeds]:
    """Save ``model`` in ``folder``, convert it, check the case fails on emulate, diagnose it; returns the
    diagnosis, the model path and the goldens."""
    path = save(model, folder / "model.onnx")
    magnitudes = collect_magnitudes(model, feeds=feeds)  # as the session does, on the golden's feeds
    conversion = convert(model, options=options, magnitudes=magnitudes)
    goldens = make_runner("ort", model).run(feeds).outputs
    obtained = make_runner("emulate", conversion.model).run(cast_feeds(feeds, input_specs(conversion.model))).outputs
    assert not judge_outputs(obtained, goldens, precision=options.low_precision_type, policy=TolerancePolicy())
    case = FailedCase(
        reference=model,
        model_path=path,
        conversion=conversion,
        options=options,
        magnitudes=magnitudes,
        feeds=feeds,
        goldens=goldens,
        obtained=lambda: obtained,
        policy=TolerancePolicy(),
        runner="emulate",
    )
    found = diagnose_failure(case, work_dir=folder / "diagnosis", budget=budget)
    return found, path, goldens


def run_printed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a printed ``castguard ...`` command as a shell would, from ``cwd``, with this checkout's castguard."""
    words = shlex.split(command)
    assert words[0] == "castguard"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "harness", *words[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def output_path_of(command: str) -> Path:
    words = shlex.split(command)
    return Path(words[words.index("--output_path") + 1])


def fp32_nodes(model: onnx.ModelProto, names: Sequence[str]) -> dict[str, bool]:
    """Per node name: whether every float output of that node is FLOAT in the (shape-inferred) model."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {
        v.name: v.type.tensor_type.elem_type
        for v in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]
    }
    by_name = {n.name: n for n in model.graph.node}
    return {name: all(types.get(o) == onnx.TensorProto.FLOAT for o in by_name[name].output) for name in names}


def passes(model: onnx.ModelProto, feeds: Feeds, goldens: Feeds, *, precision: str = "fp16") -> bool:
    obtained = make_runner("emulate", model).run(cast_feeds(feeds, input_specs(model))).outputs
    return bool(judge_outputs(obtained, goldens, precision=precision, policy=TolerancePolicy()))


def graph_of(model: onnx.ModelProto) -> list[tuple[str, str, list[str], list[str]]]:
    return [(n.name, n.op_type, list(n.input), list(n.output)) for n in model.graph.node]


def verified_model(model: onnx.ModelProto, options: ConvertOptions, found: Diagnosis, feeds: Feeds) -> onnx.ModelProto:
    """The conversion the diagnosis verified, rebuilt: the case's options plus the fix (magnitudes from the
    golden's feeds when data_max is finite, as ``castguard convert --calibration_data`` collects them)."""
    fixed = replace(options, op_types_to_exclude=(*options.op_types_to_exclude, *found.fix_ops))
    magnitudes = None if math.isinf(options.data_max) else collect_magnitudes(model, feeds=feeds)
    return convert(model, options=plan_options(fixed, found.fix_nodes), magnitudes=magnitudes).model
