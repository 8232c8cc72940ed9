"""The reliability suite (issue 33): faults repeated on purpose, each bounded in time. Marked ``reliability`` and
part of the default run; ``-m reliability`` runs them alone (with tests/integration/test_read_only.py,
tests/unit/tune/test_tune_determinism.py and the full-disk tests).

- a size-limited folder (a tmpfs of a few KiB, where mounting is permitted; skipped with the reason otherwise) for
  the goldens: one full-disk paragraph per run, nothing half-written;
- an injected I/O failure in the optional cache: one warning, every case still runs;
- SIGKILL and SIGINT of a ``pytest --model`` subprocess at times drawn from fixed seeds: whatever is left is whole
  (every golden readable; no temporary file but the one a SIGKILL cut), and the next run is clean (it removes
  what a killed writer left);
- an interrupted run that only used the ``castguard`` fixture does not claim "of 0" planned cases.
"""

from __future__ import annotations

import errno
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from onnx import TensorProto, helper

import harness.pipeline.cache
from harness.data.goldens import GoldenStore
from harness.data.models import resolve_model
from harness.data.recipes import InputRecipe
from tests.helpers.graphs import make_model, mlp_model, save

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _not_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count how often a message is said; with CI set, pytest repeats each failure's message in its
    short summary (its own CI behaviour), so the runs they make are run as a user's terminal would."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)


pytestmark = pytest.mark.reliability
ONE = ("-p", "no:cacheprovider", "-p", "no:randomly", "--precision", "fp16", "--data-max", "512,inf")
ONE += ("--exclude-ops", "none", "--keep-io-types", "false")
OWN_WARNINGS = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
"""An in-process run counts castguard's warnings only: pytest warns that it cannot rewrite ``test_models`` when an
earlier test of this worker imported it (the order of the tests decides, not castguard)."""


@contextmanager
def small_tmpfs(folder: Path, size: str) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.decode().strip() or done.returncode}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def wide_model(width: int) -> object:
    node = helper.make_node("Relu", ["x"], ["y"])
    return make_model([node], [("x", TensorProto.FLOAT, [1, width])], [("y", TensorProto.FLOAT, [1, width])])


def test_a_full_goldens_disk_is_said_once_and_leaves_nothing(pytester: pytest.Pytester) -> None:
    save(wide_model(1 << 15), pytester.path / "models" / "wide.onnx")  # 128 KiB in, 128 KiB out (random: no zip gain)
    with small_tmpfs(pytester.path / "goldens", "64k"):
        result = pytester.runpytest("--model", "models/wide.onnx", *ONE)
        left = sorted(p.name for p in (pytester.path / "goldens").rglob("*"))
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert out.count("nothing was written (the previous file, if any, is kept)") == 1  # the paragraph, once
    assert out.count("(said in full once)") == 2 and "castguard: 2 cases: 2 error" in out
    assert all(not name.endswith((".tmp", ".npz", ".json")) for name in left), left


def test_an_injected_cache_failure_is_one_warning(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    pytester.runpytest("--model", "models/mlp.onnx", *ONE).assert_outcomes(passed=2, failed=1)

    def broken(path: Path, data: object, **_: object) -> None:
        raise OSError(errno.EIO, "Input/output error", str(path))

    monkeypatch.setattr(harness.pipeline.cache, "atomic_write", broken)
    result = pytester.runpytest("--model", "models/mlp.onnx", *ONE, "--cache-dir", "fresh-cache", *OWN_WARNINGS)
    result.assert_outcomes(passed=3, warnings=1)
    assert result.stdout.str().count("castguard cache skipped") == 1


def _project(folder: Path) -> None:
    save(mlp_model(), folder / "models" / "mlp.onnx")
    save(mlp_model(seed=3, hidden=64), folder / "models" / "mlp2.onnx")


def _pytest(folder: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pytest", "--model", "models/mlp.onnx", "--model", "models/mlp2.onnx", *ONE]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)


def _whole(folder: Path, *, killed: bool = False) -> None:
    """Nothing half-written: every golden present is readable, and no temporary file is left, except, right after a
    SIGKILL, the hidden one of the write it cut (nothing can remove that then; the next run does)."""
    temps = [p for p in folder.rglob("*") if p.name.endswith(".tmp")]
    if killed:
        temps = [p for p in temps if not (p.name.startswith(".") and ".cg-" in p.name)]
    assert temps == [], temps
    for name in ("mlp", "mlp2"):
        spec = resolve_model(str(folder / "models" / f"{name}.onnx"), search_dir=folder)
        store = GoldenStore(folder / "goldens")
        if store.path_for(spec, InputRecipe()).exists():
            store.load(spec, InputRecipe())


def _plant_killed_writes(folder: Path, *, dead_pid: int) -> None:
    host = re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname())
    for where in ("goldens", ".castguard-cache/plots", "castguard-report"):
        (folder / where).mkdir(parents=True, exist_ok=True)
        (folder / where / f".x.png.cg-{host}-{dead_pid}.k1ll3d00.tmp").write_bytes(b"half")


@pytest.mark.parametrize(("seed", "sig"), [(1, signal.SIGKILL), (2, signal.SIGINT)], ids=["SIGKILL", "SIGINT"])
def test_a_killed_run_leaves_whole_files_and_the_next_run_is_clean(tmp_path: Path, seed: int, sig: int) -> None:
    folder = tmp_path / "a project"
    _project(folder)
    delay = random.Random(seed).uniform(1.0, 6.0)  # fixed seeds: the same instants every run
    child = _pytest(folder)
    time.sleep(delay)
    child.send_signal(sig)
    out, _ = child.communicate(timeout=120)
    if sig == signal.SIGINT:
        assert b"INTERNALERROR" not in out, out.decode()[-2000:]
    _whole(folder, killed=sig == signal.SIGKILL)
    if sig == signal.SIGKILL:  # what a kill mid-write leaves, wherever the seeded instant fell
        _plant_killed_writes(folder, dead_pid=child.pid)
    again = _pytest(folder)
    out, _ = again.communicate(timeout=180)
    assert again.returncode in (0, 1), out.decode()[-2000:]
    assert b"INTERNALERROR" not in out and b"Traceback" not in out
    _whole(folder)
    final = _pytest(folder)
    out, _ = final.communicate(timeout=180)
    assert final.returncode == 0, out.decode()[-2000:]  # every golden written by now: all pass


FIXTURE_TESTS = """
import pytest


def test_one(castguard):
    castguard.check("models/mlp.onnx", precision="fp16", data_max=512, runner="emulate")


def test_two(castguard):
    raise KeyboardInterrupt
"""


def test_an_interrupted_fixture_only_run_claims_no_planned_cases(pytester: pytest.Pytester) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    pytester.makepyfile(test_user=FIXTURE_TESTS)
    pytester.runpytest_subprocess("-p", "no:randomly", "-k", "one")  # the golden
    result = pytester.runpytest_subprocess("-p", "no:randomly")  # KeyboardInterrupt: in its own process
    out = result.stdout.str()
    assert "interrupted after 1 case" in out and "of 0" not in out, out
