"""What a failing case's diagnosis costs: the profile (one marked-all run of each model) and the fix
verification (conversions + runs on the case's runner), against the old first-divergence search alone.

Run from the repository root: ``python benchmarks/bench_diagnose.py [MODEL.onnx ...]``. Figures only (no
assertions). Default: the LLaMA-style block built in ``tests/helpers/llama.py`` at data_max inf (fp16), and any
given model at data_max inf on random int ids / [-1, 1] floats (``harness.convert.calibration.random_feeds``).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.convert import ConvertOptions, convert
from harness.convert.calibration import random_feeds
from harness.data.feeds import cast_feeds, input_specs
from harness.diagnose import FailedCase, diagnose_failure
from harness.diagnose.profile import ModelPair, divergence_profile
from harness.judge.tolerances import TolerancePolicy
from harness.runners import make_runner


def bench(name: str, model: onnx.ModelProto, path: Path, feeds: list[dict]) -> None:  # type: ignore[type-arg]
    options = ConvertOptions(data_max=math.inf)
    start = time.perf_counter()
    conversion = convert(model, options=options, magnitudes=None, base_dir=path.parent)
    convert_s = time.perf_counter() - start
    goldens = make_runner("ort", model, model_dir=path.parent).run(feeds).outputs
    obtained = (
        make_runner("emulate", conversion.model, model_dir=path.parent)
        .run(cast_feeds(feeds, input_specs(conversion.model)))
        .outputs
    )
    start = time.perf_counter()
    divergence_profile(
        ModelPair(model, conversion.model, feeds, precision="fp16", policy=TolerancePolicy(), model_dir=path.parent)
    )
    profile_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        case = FailedCase(
            reference=model,
            model_path=path,
            conversion=conversion,
            options=options,
            magnitudes=None,
            feeds=feeds,
            goldens=goldens,
            obtained=obtained,
            policy=TolerancePolicy(),
        )
        found = diagnose_failure(case, work_dir=Path(work))
        total_s = time.perf_counter() - start
    cause = found.cause.node if found.cause else "-"
    print(
        f"{name:<22} nodes {len(model.graph.node):>4}  convert {convert_s:6.2f}s  profile {profile_s:6.2f}s  "
        f"diagnosis {total_s:6.2f}s ({total_s / max(convert_s + profile_s, 1e-9):4.1f}x convert+profile)  "
        f"evaluations {found.evaluations}/{found.budget}  verified {found.verified}  cause {cause}  "
        f"fix {list(found.fix_nodes) or list(found.fix_ops)}"
    )


def main(argv: list[str]) -> None:
    from tests.helpers.graphs import save
    from tests.helpers.llama import llama_feeds, llama_model

    with tempfile.TemporaryDirectory() as folder:
        model = llama_model()
        bench("llama-style (built)", model, save(model, Path(folder) / "llama.onnx"), llama_feeds())
    for arg in argv:
        path = Path(arg).resolve()
        model = onnx.load(str(path))
        bench(path.name, model, path, random_feeds(model, seed=0, input_shapes={}, dynamic_default=8)[0])


if __name__ == "__main__":
    main(sys.argv[1:])
