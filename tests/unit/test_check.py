"""harness.check.Checker without pytest's plugin: what the castguard fixture wraps (issue 24.1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.check import Checker
from harness.config import HarnessConfig
from harness.data.models import bundled_models_dir
from harness.report import CaseRecord
from tests.helpers.graphs import mlp_model, save


def checker(tmp_path: Path, records: list[CaseRecord]) -> Checker:
    config = HarnessConfig(
        goldens_dir=tmp_path / "goldens",
        report_dir=tmp_path / "report",
        cache_dir=tmp_path / "cache",
        project_dir=tmp_path,
    )
    return Checker(config, output_dir=tmp_path / "out", bundled_dir=bundled_models_dir(), on_record=records.append)


def test_golden_written_once_then_cases_recorded(tmp_path: Path) -> None:
    save(mlp_model(), tmp_path / "models" / "mlp.onnx")
    feeds = [{"x": np.random.default_rng(i).normal(size=(1, 8)).astype(np.float32)} for i in range(2)]
    records: list[CaseRecord] = []
    first = checker(tmp_path, records).check("models/mlp.onnx", inputs=feeds)
    assert first.status == "fail" and first.record is None and not records
    assert "golden written" in first.message and "rerun these tests" in first.message
    assert list((tmp_path / "goldens" / "models.mlp").glob("file-*.npz"))
    again = checker(tmp_path, records)  # a new process: the golden exists now
    results = again.sweep("models/mlp.onnx", precisions=["fp16", "bf16"], inputs=feeds)
    assert [r.status for r in results] == ["pass", "pass"]
    assert [r.record for r in results] == records and [r.case.precision for r in records] == ["fp16", "bf16"]
    assert results[0].outputs[0].name == "y" and results[0].lowp_flop_share == 1.0
    same = again.check("models/mlp.onnx", precision="fp16", inputs=[dict(f) for f in feeds])
    assert same.passed and same.record is not None and same.record.inputs_id == results[0].record.inputs_id


def test_a_golden_written_in_this_run_fails_every_check_of_the_run(tmp_path: Path) -> None:
    """Two checkers writing into one run folder (two xdist workers of one run): the one that did not write the
    golden still knows it is new (the sidecar's written_in_run), so the first run fails the same checks in any
    order; a later run (another run id) compares."""
    save(mlp_model(), tmp_path / "models" / "mlp.onnx")
    feeds = [{"x": np.random.default_rng(0).normal(size=(1, 8)).astype(np.float32)}]
    config = HarnessConfig(
        goldens_dir=tmp_path / "goldens",
        report_dir=tmp_path / "rep",
        cache_dir=tmp_path / "cache",
        project_dir=tmp_path,
    )
    run_folder = tmp_path / "rep" / "runs" / "20261127T010000000000Z-1-abcd"

    def worker(folder: Path) -> Checker:
        return Checker(config, output_dir=folder, bundled_dir=bundled_models_dir(), on_record=lambda r: None)

    first = worker(run_folder).check("models/mlp.onnx", precision="bf16", inputs=feeds)
    other = worker(run_folder).check("models/mlp.onnx", precision="fp16", inputs=feeds)
    assert first.golden_written and other.golden_written and not other.passed
    assert "golden written in this run" in other.message
    later = worker(tmp_path / "rep" / "runs" / "20261127T020000000000Z-1-abcd").check(
        "models/mlp.onnx", precision="fp16", inputs=feeds
    )
    assert later.passed and not later.golden_written


def test_the_fixture_takes_every_setting_the_checker_takes() -> None:
    """The fixture passes ``CheckSettings``/``SweepSettings`` on to the checker as given: a setting added to
    ``Checker.check`` or ``Checker.sweep`` but not to its settings type would be out of the fixture's reach."""
    import inspect

    from harness.check import CheckSettings, SweepSettings

    for method, settings in ((Checker.check, CheckSettings), (Checker.sweep, SweepSettings)):
        params = inspect.signature(method).parameters.values()
        keywords = {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert keywords == set(settings.__annotations__), method.__name__
