"""A warm run whose results did not change draws no plot (issue 29, the warm sweep floor): report.html's plots come
from the cache folder, matplotlib is never imported, and they are the bytes a fresh draw gives; a run whose results
changed draws its plots again. Run as a user does: ``pytest --model`` in a project folder whose name has a space."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import Run
from tests.helpers.graphs import mlp_model, save

TWO_CASES = ("--data-max", "512,inf", "--exclude-ops", "none", "--keep-io-types", "true")  # plots compare cases
# pytest_unconfigure comes after castguard wrote its report: whether drawing the plots imported matplotlib
SAYS_MATPLOTLIB = """import sys
def pytest_unconfigure(config):
    print("matplotlib imported:", "matplotlib" in sys.modules)
"""


def _plots(project: Path) -> list[str]:
    html = (project / "castguard-report" / "report.html").read_text(encoding="utf-8")
    plots = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(plots) == 2, "report.html should carry the error-vs-share plot and the data_max grid"
    return plots


def _sweep(castguard_in: Run, project: Path, *args: str, status: int = 0) -> tuple[list[str], bool]:
    done = castguard_in(project, "--model", "mlp.onnx", *TWO_CASES, *args)
    assert done.ret == status, done.output[-3000:]
    said = re.findall(r"matplotlib imported: (True|False)", done.output)
    assert said, done.output[-3000:]
    return _plots(project), said[-1] == "True"


def test_a_warm_run_reads_its_plots_from_the_cache_and_a_changed_result_redraws(
    tmp_path: Path, castguard_in: Run
) -> None:
    project = tmp_path / "user project"
    project.mkdir()
    save(mlp_model(), project / "mlp.onnx")
    (project / "conftest.py").write_text(SAYS_MATPLOTLIB)
    cache = project / ".castguard-cache" / "plots"

    cold, drew = _sweep(castguard_in, project, "--precision", "fp16", status=1)  # 1: the golden was written
    assert drew and len(list(cache.glob("*.png"))) == 2
    warm, drew = _sweep(castguard_in, project, "--precision", "fp16")
    assert not drew, "a warm run with unchanged results imported matplotlib"
    assert warm == cold

    fresh, drew = _sweep(castguard_in, project, "--precision", "fp16", f"--cache-dir={tmp_path / 'empty cache'}")
    assert drew and fresh == warm, "the cached plots are not the bytes of a fresh draw of the same results"

    changed, drew = _sweep(castguard_in, project, "--precision", "bf16")  # another error, another colour
    assert drew, "a run whose results changed must draw its plots"
    assert changed[0] != warm[0] and changed[1] != warm[1], "a stale plot was served for changed results"
    assert len(list(cache.glob("*.png"))) == 4
