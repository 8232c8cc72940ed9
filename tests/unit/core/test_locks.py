"""The one lock (harness/core/locks.py): a holder killed with SIGKILL frees every castguard lock at once.

Each case starts a child Python process that takes one of castguard's locks through the code that takes it in a
real run (a golden, a cache entry, the report folder's publish lock, a run's ``.active`` marker), says so, and
waits; the test kills it with SIGKILL and takes the same lock with a short time-out. The old golden lock (an
``O_EXCL`` file) stayed behind its killed holder, so the next run waited 300 s and failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from harness.core.locks import LockTimeout, held, is_held, try_held
from harness.data.goldens import GoldenStore
from harness.data.models import resolve_model
from harness.data.recipes import InputRecipe
from harness.pipeline.cache import ContentCache
from harness.report.runs import ActiveRun, is_active, publish_lock
from tests.helpers.graphs import mlp_model, save

REPO = Path(__file__).resolve().parents[3]
RECIPE = InputRecipe(seed=1, iterations=2)

HOLDERS = {
    "golden": """
        from harness.data.goldens import GoldenStore
        from harness.data.models import resolve_model
        from harness.data.recipes import InputRecipe
        spec = resolve_model(str(root / "mlp.onnx"), search_dir=root)
        hold = GoldenStore(root / "goldens").locked(spec, InputRecipe(seed=1, iterations=2))
    """,
    "cache": """
        from harness.pipeline.cache import ContentCache
        hold = ContentCache(root / "cache")._locked(root / "cache" / "magnitudes" / "k.json")
    """,
    "publish": """
        from harness.report.runs import publish_lock
        hold = publish_lock(root / "report")
    """,
    "active": """
        import contextlib
        from harness.report.runs import ActiveRun
        run = ActiveRun(root / "report" / "runs" / "r")
        hold = contextlib.nullcontext()
        run.acquire()
    """,
}


def _golden_lock(root: Path, timeout_s: float) -> AbstractContextManager[None]:
    spec = resolve_model(str(root / "mlp.onnx"), search_dir=root)
    return GoldenStore(root / "goldens", lock_timeout_s=timeout_s).locked(spec, RECIPE)


def _active_lock(root: Path, timeout_s: float) -> AbstractContextManager[None]:
    if is_active(root / "report" / "runs" / "r"):  # what prune_runs asks before deleting a run folder
        raise LockTimeout(where=root, problem="run is active", fix="-")
    return held(root / "report" / "runs" / "r" / ".active", timeout_s=timeout_s)


NEXT_RUN: dict[str, Callable[[Path, float], AbstractContextManager[None]]] = {
    "golden": _golden_lock,
    # the lock file ContentCache._locked takes for the entry magnitudes/k.json
    "cache": lambda root, timeout_s: held(root / "cache" / "magnitudes" / "k.lock", timeout_s=timeout_s),
    "publish": lambda root, timeout_s: held(root / "report" / ".castguard.lock", timeout_s=timeout_s),
    "active": _active_lock,
}


def _child(root: Path, what: str) -> subprocess.Popen[str]:
    script = (
        textwrap.dedent("""
        import sys, time
        from pathlib import Path
        root = Path(sys.argv[1])
    """)
        + textwrap.dedent(HOLDERS[what])
        + textwrap.dedent("""
        with hold:
            print("held", flush=True)
            time.sleep(600)
    """)
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", script, str(root)], stdout=subprocess.PIPE, text=True, env=env)


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    save(mlp_model(), tmp_path / "mlp.onnx")
    yield tmp_path


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
@pytest.mark.parametrize("what", sorted(HOLDERS))
def test_a_killed_holder_frees_the_lock_at_once(root: Path, what: str) -> None:
    child = _child(root, what)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout):  # while the holder lives, the lock really is held
            with NEXT_RUN[what](root, 0.3):
                pass
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with NEXT_RUN[what](root, 5.0):  # the old golden lock waited 300 s here, then failed
        pass


def test_try_held_and_is_held_see_another_holder(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    assert not is_held(lock) and not lock.exists()  # asking creates nothing
    with held(lock):
        assert is_held(lock)
        with try_held(lock) as free:
            assert not free
    assert not is_held(lock)
    with try_held(lock) as free:
        assert free


def test_remove_deletes_the_lock_file_and_a_later_holder_still_excludes(tmp_path: Path) -> None:
    lock = tmp_path / "g.lock"
    with held(lock, remove=True):
        assert lock.exists()
    assert not lock.exists()
    with held(lock, remove=True):
        with pytest.raises(LockTimeout):
            with held(lock, timeout_s=0.2, remove=True):
                pass
    assert not lock.exists()


def test_a_run_holds_its_active_marker_until_released(tmp_path: Path) -> None:
    run = ActiveRun(tmp_path / "runs" / "r")
    run.acquire()
    assert is_active(tmp_path / "runs" / "r")
    run.release()
    assert not is_active(tmp_path / "runs" / "r") and not (tmp_path / "runs" / "r" / ".active").exists()
    with publish_lock(tmp_path):
        assert is_held(tmp_path / ".castguard.lock")
    cache = ContentCache(tmp_path / "cache")
    with cache._locked(tmp_path / "cache" / "convert" / "k.onnx"):
        assert is_held(tmp_path / "cache" / "convert" / "k.lock")
