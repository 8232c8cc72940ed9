"""Runner plugins (issue 24.2): the ``castguard.runners`` entry-point group is the one path for every runner.

The plugin is the example package in examples/runner_plugin, "installed" with a real dist-info on sys.path
(tests/helpers/plugin_dist.py); tests/integration/test_runner_plugin_venv.py pip-installs it into a fresh venv.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.convert import ConvertOptions, convert
from harness.core.errors import RunnerUnavailable, UserError
from harness.report.model import Provenance
from harness.report.provenance import collect_provenance
from harness.runners import make_runner, runner_names
from harness.runners.registry import BUILTIN, registered
from harness.sweep.checks import check_runner
from tests.helpers.convert_builders import F32, model, node, vi
from tests.helpers.plugin_dist import PACKAGE, install_into


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    registered.cache_clear()
    folder = install_into(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)  # this folder's copy, not an earlier test's
    yield folder
    registered.cache_clear()


def relu_model() -> onnx.ModelProto:
    return model(
        [node("Relu", ["x"], ["h"], "relu"), node("Sigmoid", ["h"], ["y"], "sig")],
        [vi("x", F32, [2, 3])],
        [vi("y", F32, [2, 3])],
        [],
    )


def test_builtin_runners_come_from_the_entry_point_group() -> None:
    registered.cache_clear()
    found = registered()
    assert set(BUILTIN) <= set(found)
    assert {found[n].distribution for n in BUILTIN} == {"castguard"}
    assert found["emulate"].value == "harness.runners.builtin:emulate"


def test_an_installed_plugin_is_discovered_and_runs(plugin_path: Path) -> None:
    assert "onnxref" in runner_names()
    check_runner("onnxref", where="--runner")  # the sweep, SweepPoint and --runner all accept it
    low = convert(relu_model(), options=ConvertOptions(), magnitudes=None).model
    feed = {"x": np.array([[-1, 0.5, 2], [3, -4, 1e-3]], np.float16)}
    with make_runner("onnxref", low) as runner:
        out = runner.infer(feed)["y"]
    assert runner.name == "onnxref" and runner.rounds_low_precision
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-np.maximum(feed["x"].astype(np.float32), 0))), atol=1e-3)


def test_a_plugin_without_the_models_low_type_is_unavailable_with_the_reason(plugin_path: Path) -> None:
    low = convert(relu_model(), options=ConvertOptions(low_precision_type="bf16"), magnitudes=None).model
    with pytest.raises(
        RunnerUnavailable,
        match=r"onnxref \(castguard-onnxref-runner 0\.1\.0\) runs fp16 only; "
        r"this model holds bf16",
    ):
        make_runner("onnxref", low)


def test_provenance_names_the_plugin_with_its_package_and_version(plugin_path: Path) -> None:
    prov = collect_provenance(hypothesis_profile="default", runners=("emulate", "onnxref"), project_dir=None)
    assert prov.runner_sources == (("emulate", "castguard", "0.1.0"), ("onnxref", "castguard-onnxref-runner", "0.1.0"))
    assert prov.runners_text() == "emulate, onnxref (castguard-onnxref-runner 0.1.0)"


def test_unknown_runner_lists_the_plugins_too(plugin_path: Path) -> None:
    with pytest.raises(UserError, match="(?s)unknown runner 'nope'.*emulate, reference, trt, onnxref"):
        make_runner("nope", relu_model())


def test_a_plugin_missing_its_declarations_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registered.cache_clear()
    folder = install_into(
        tmp_path / "site",
        entry_points="bad = castguard_onnxref_runner:Bad",
        extra_source="class Bad(OnnxRefRunner):\n    precisions = ('fp8',)\n",
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)  # this folder's copy, not an earlier test's
    try:
        with pytest.raises(
            UserError,
            match=r"entry point bad = 'castguard_onnxref_runner:Bad' of "
            r"castguard-onnxref-runner 0\.1\.0.*precisions is \('fp8',\)",
        ):
            make_runner("bad", relu_model())
    finally:
        registered.cache_clear()


def test_two_packages_claiming_one_name_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registered.cache_clear()
    folder = install_into(
        tmp_path / "site", name="evil-runner", entry_points="emulate = castguard_onnxref_runner:OnnxRefRunner"
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)  # this folder's copy, not an earlier test's
    try:
        assert "emulate" in runner_names()  # listing the runners, or using another one, is no error (33.6)
        check_runner("emulate", where="--runner")  # SweepSpec() validates its default at import: no error there
        make_runner("reference", relu_model())
        with pytest.raises(
            UserError,
            match=r"(?s)runner 'emulate'.*registered by both .*evil-runner.*castguard.*pip uninstall evil-runner",
        ):
            make_runner("emulate", relu_model())
    finally:
        registered.cache_clear()


def test_old_reports_without_runner_sources_still_read() -> None:
    prov = Provenance(
        castguard="0",
        onnx="1",
        onnxruntime="1",
        numpy="1",
        python="3",
        platform="p",
        hostname="h",
        runners=("emulate",),
    )
    assert prov.runners_text() == "emulate"


def test_each_in_process_runner_planned_begins_its_start_up_work_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prepare_runners`` (called as a run opens) calls each named runner's ``prepare`` once: built-in or plugin
    alike, never for a runner that runs in a child process, and skipping names nobody registered."""
    import harness.runners.registry as registry
    from harness.runners.base import Runner
    from harness.runners.ort_cuda import OrtCudaRunner

    began: list[str] = []

    class InProcess(Runner):
        precisions = ("fp16",)
        rounds_low_precision = True
        isolated = False

        @classmethod
        def prepare(cls) -> None:
            began.append(cls.__name__)

    class InAChild(InProcess):
        isolated = True

    plugins = {"mine": InProcess, "child": InAChild}
    real_load = registry.load_plugin
    monkeypatch.setattr(registry, "load_plugin", lambda e: plugins.get(e, None) or real_load(e))
    found = {**registry.registered(), "mine": "mine", "child": "child"}
    monkeypatch.setattr(registry, "registered", lambda: found)
    monkeypatch.setattr(OrtCudaRunner, "prepare", classmethod(lambda cls: began.append("ort-cuda")))
    registry.prepare_runners(["emulate", "ort-cuda", "mine", "child", "nobody", "mine", "ort-cuda"])
    assert began == ["ort-cuda", "InProcess"]
