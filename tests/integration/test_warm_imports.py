"""A sweep imports what it runs (issue 29, the warm sweep floor): ``pytest --model`` loads neither AutoCast's
function (``harness.convert.api``) nor the tuning engine (``harness.tune.engine``), which ``harness.convert`` and
``harness.tune`` import only on first use, nor, without nightly options, the nightly end (``harness.nightly.run``),
nor, when every case passes, the diagnosis; the converter is loaded by the cold run that converts (so the probe sees
imports at all) and not by the warm one, whose conversions are cache hits. Run as a user does, cold then warm, in a project
folder whose name has a space."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import Run
from tests.helpers.graphs import mlp_model, save

PROBED = (
    "harness.convert.pipeline",
    "harness.convert.api",
    "harness.tune.engine",
    "harness.nightly.run",
    "harness.diagnose.failure",
)
# pytest_unconfigure comes after castguard wrote its report: which of those modules the whole run imported
SAYS_MODULES = f"""import sys
def pytest_unconfigure(config):
    for name in {PROBED!r}:
        print("imported", name, name in sys.modules)
"""


def _imported(castguard_in: Run, project: Path, *, status: int) -> dict[str, bool]:
    done = castguard_in(project, "--model", "mlp.onnx", "--precision", "fp16", "--data-max", "512,inf")
    assert done.ret == status, done.output[-3000:]
    said = dict(re.findall(r"imported (\S+) (True|False)", done.output))
    assert sorted(said) == sorted(PROBED), done.output[-3000:]
    return {name: value == "True" for name, value in said.items()}


def test_a_sweep_imports_neither_autocasts_function_the_tuning_engine_nor_the_nightly_end(
    tmp_path: Path, castguard_in: Run
) -> None:
    project = tmp_path / "user project"
    project.mkdir()
    save(mlp_model(), project / "mlp.onnx")
    (project / "conftest.py").write_text(SAYS_MODULES)
    unused = {
        "harness.convert.api": False,
        "harness.tune.engine": False,
        "harness.nightly.run": False,
        "harness.diagnose.failure": False,  # every case passes: nothing to diagnose
    }
    cold = _imported(castguard_in, project, status=1)  # 1: the golden was written
    assert cold == {"harness.convert.pipeline": True, **unused}, cold
    warm = _imported(castguard_in, project, status=0)  # every conversion a cache hit: the converter is not loaded
    assert warm == {"harness.convert.pipeline": False, **unused}, warm
