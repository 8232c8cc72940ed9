"""Cases that convert to the same model run once; the others say "same model as <case>"."""
from __future__ import annotations

from pathlib import Path

from harness.config import HarnessConfig
from harness.data.models import bundled_models_dir
from harness.run.dedup import SAME_MODEL, SAME_PLAN, model_digest
from harness.run.session import AccuracySession, SweepCase
from harness.sweep import SweepSpec, expand

REPO = Path(__file__).resolve().parents[3]


def test_identical_converted_models_run_once_and_name_the_first_case(tmp_path: Path) -> None:
    # needs_constraints: Add(65504)/Sub(65504) exceed both 8 and 512, so data_max 8 and 512 keep the same nodes
    spec = SweepSpec(precisions=("fp16",), data_max=(8.0, 512.0, float("inf")), exclusions=SweepSpec().exclusions[:1],
                     keep_io_types=(False,))
    config = HarnessConfig(models=("needs_constraints",), goldens_dir=REPO / "goldens", report_dir=tmp_path / "r",
                           cache_dir=tmp_path / "c", sweep=spec)
    session = AccuracySession(config, bundled_dir=bundled_models_dir())
    tight, default, off = (session.check_low_precision(SweepCase("needs_constraints", c)).record
                           for c in expand(spec))
    assert tight is not None and default is not None and off is not None
    assert SAME_MODEL not in " ".join(tight.notes) and tight.timings.infer_s > 0
    assert f"{SAME_MODEL} {tight.case_id}" in default.notes
    assert default.case.data_max == 512.0 and default.timings.infer_s == 0.0       # not run again
    assert (default.status, default.outputs, default.outputs_file) == (tight.status, tight.outputs, tight.outputs_file)
    assert off.status == "fail" and not any(n.startswith((SAME_MODEL, SAME_PLAN)) for n in off.notes)  # data_max inf


def test_the_digest_sees_any_change_of_the_graph() -> None:
    from tests.helpers.graphs import mlp_model

    first, second = mlp_model(), mlp_model()
    assert model_digest(first) == model_digest(second)
    second.graph.node[0].name = "renamed"
    assert model_digest(first) != model_digest(second)


def test_an_identical_precision_plan_is_reused_on_emulate_and_only_noted_on_other_runners(tmp_path: Path) -> None:
    # keep_io_types changes the graph (fp32 IO plus boundary Casts) but not which nodes run in fp16
    spec = SweepSpec(precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1],
                     keep_io_types=(False, True), runners=("emulate", "ort"))
    config = HarnessConfig(models=("needs_constraints",), goldens_dir=REPO / "goldens", report_dir=tmp_path / "r",
                           cache_dir=tmp_path / "c", sweep=spec)
    session = AccuracySession(config, bundled_dir=bundled_models_dir())
    records = {(c.keep_io_types, c.runner): session.check_low_precision(SweepCase("needs_constraints", c)).record
               for c in expand(spec)}
    first, io_emulate = records[(False, "emulate")], records[(True, "emulate")]
    assert first is not None and io_emulate is not None
    assert f"{SAME_MODEL} {first.case_id} (identical precision plan)" in io_emulate.notes
    assert io_emulate.outputs == first.outputs and io_emulate.timings.infer_s == 0.0
    ort_first, io_ort = records[(False, "ort")], records[(True, "ort")]
    assert ort_first is not None and io_ort is not None
    assert f"{SAME_PLAN} {ort_first.case_id}" in io_ort.notes and io_ort.timings.infer_s > 0    # ran anyway
