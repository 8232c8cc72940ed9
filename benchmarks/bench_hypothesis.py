"""What the Hypothesis work costs (figures, not assertions): ``pytest benchmarks/bench_hypothesis.py -s -p no:xdist``.

* ``test_fuzz_rate``: converter fuzzing (``tests/property/converter_contract.py``): N generated models, each
  drawn, its magnitudes collected (one ORT child process), converted twice, checked and run on ORT + emulate.
  Printed: models per second, so a profile's budget converts to minutes (ci: 2 x 60, nightly: 2 x 5000).
* ``test_adversarial_search``: one targeted search (``harness.pipeline.hunt.search_case``) under the ci
  profile on the bundled models: inputs tried, whether it found a failure, seconds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from harness.config import HarnessConfig
from harness.data.models import bundled_models_dir
from harness.pipeline.hunt import search_case
from harness.pipeline.session import AccuracySession, Case
from harness.sweep import SweepPoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "property"))
from tests.helpers.converter_contract import SweepPoint as FuzzCase  # noqa: E402
from tests.helpers.converter_contract import cases, check_contract  # noqa: E402

MODELS = 40


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_fuzz_rate(benchmark: Any, precision: str) -> None:
    checked: list[int] = []

    @settings(
        max_examples=MODELS,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(case=cases(precision=precision))
    def fuzz(case: FuzzCase) -> None:
        check_contract(case)
        checked.append(len(case.model.graph.node))

    start = time.perf_counter()
    benchmark.pedantic(fuzz, rounds=1, iterations=1)
    elapsed = time.perf_counter() - start
    benchmark.extra_info.update(
        models=len(checked), models_per_s=len(checked) / elapsed, mean_nodes=sum(checked) / max(len(checked), 1)
    )
    print(
        f"\n{precision}: {len(checked)} models in {elapsed:.1f} s = {len(checked) / elapsed:.2f} models/s, "
        f"{sum(checked) / max(len(checked), 1):.1f} nodes on average"
    )


@pytest.mark.parametrize(
    ("model", "case", "val_ranges"),
    [
        ("needs_constraints", SweepPoint(node_precisions=(("Add", "fp16"), ("Sub", "fp16"))), ()),
        ("needs_constraints", SweepPoint(), ()),
        ("transformer_block", SweepPoint(), ()),
        ("mnist", SweepPoint(), (("", 0.0, 1.0),)),
    ],
    ids=["needs_constraints-forced", "needs_constraints-default", "transformer_block-default", "mnist-default-01"],
)
def test_adversarial_search(
    benchmark: Any, tmp_path: Path, model: str, case: SweepPoint, val_ranges: tuple[tuple[str, float, float], ...]
) -> None:
    config = HarnessConfig(
        models=(model,),
        goldens_dir=tmp_path / "g",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        val_ranges=val_ranges,
    )
    session = AccuracySession.open(config, bundled_dir=bundled_models_dir())
    start = time.perf_counter()
    found = benchmark.pedantic(
        lambda: search_case(session, Case(model, case), profile=settings.get_profile("ci")), rounds=1, iterations=1
    )
    elapsed = time.perf_counter() - start
    benchmark.extra_info.update(inputs=found.outcome.examples, failed=found.failed, seconds=elapsed)
    print(
        f"\n{model} [{case.id}]: {found.outcome.examples} inputs in {elapsed:.2f} s "
        f"({'found a failure' if found.failed else 'no failure'}; best error/tolerance "
        f"{found.outcome.best_score:.3g})"
    )
