"""Cases that convert to the same model run once; the others name the first case (``reused_from``)."""

from __future__ import annotations

from pathlib import Path

from harness.config import HarnessConfig
from harness.data.models import bundled_models_dir
from harness.pipeline.dedup import model_digest, plan_digest
from harness.pipeline.session import AccuracySession, Case
from harness.sweep import SweepSpec, expand

REPO = Path(__file__).resolve().parents[3]


def test_identical_converted_models_run_once_and_name_the_first_case(tmp_path: Path) -> None:
    # needs_constraints: Add(65504)/Sub(65504) exceed both 8 and 512, so data_max 8 and 512 keep the same nodes
    spec = SweepSpec(
        precisions=("fp16",),
        data_max=(8.0, 512.0, float("inf")),
        exclusions=SweepSpec().exclusions[:1],
        keep_io_types=(False,),
    )
    config = HarnessConfig(
        models=("needs_constraints",),
        goldens_dir=REPO / "goldens",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        sweep=spec,
    )
    session = AccuracySession.open(config, bundled_dir=bundled_models_dir())
    tight, default, off = (session.check_low_precision(Case("needs_constraints", c)).record for c in expand(spec))
    assert tight is not None and default is not None and off is not None
    assert tight.reused_from is None and tight.timings.infer_s > 0
    assert (default.reused_from, default.reuse_kind) == (tight.case_id, "graph")
    assert default.case.data_max == 512.0 and default.timings.infer_s == 0.0  # not run again
    assert (default.status, default.outputs, default.outputs_file) == (tight.status, tight.outputs, tight.outputs_file)
    assert off.status == "fail" and (off.reused_from, off.same_plan_as) == (None, None)  # data_max inf


def test_the_digest_sees_any_change_of_the_graph() -> None:
    from tests.helpers.graphs import mlp_model

    first, second = mlp_model(), mlp_model()
    assert model_digest(first) == model_digest(second)
    second.graph.node[0].name = "renamed"
    assert model_digest(first) != model_digest(second)


def test_keep_io_types_variants_are_not_one_plan(tmp_path: Path) -> None:
    # needs_constraints keeps Add/Sub FP32 at data_max 512: with keep_io_types off they read x rounded to fp16,
    # with it on they read x exact, so the same node plan can give other values; both cases must run
    spec = SweepSpec(
        precisions=("fp16",),
        data_max=(512.0,),
        exclusions=SweepSpec().exclusions[:1],
        keep_io_types=(False, True),
        runners=("emulate",),
    )
    config = HarnessConfig(
        models=("needs_constraints",),
        goldens_dir=REPO / "goldens",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        sweep=spec,
    )
    session = AccuracySession.open(config, bundled_dir=bundled_models_dir())
    low_io, kept_io = (session.check_low_precision(Case("needs_constraints", c)).record for c in expand(spec))
    assert low_io is not None and kept_io is not None
    assert (kept_io.reused_from, kept_io.same_plan_as) == (None, None)
    assert kept_io.timings.infer_s > 0 and low_io.timings.infer_s > 0


def test_the_plan_digest_covers_the_graph_io_types() -> None:
    from harness.convert import ConvertOptions, convert
    from tests.helpers.graphs import mlp_model

    model = mlp_model()
    low_io = convert(model, options=ConvertOptions(), magnitudes=None)
    again = convert(model, options=ConvertOptions(), magnitudes=None)
    kept_io = convert(model, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert plan_digest(low_io, precision="fp16") == plan_digest(again, precision="fp16")
    assert sorted(low_io.low_nodes) == sorted(kept_io.low_nodes)
    assert plan_digest(low_io, precision="fp16") != plan_digest(kept_io, precision="fp16")
