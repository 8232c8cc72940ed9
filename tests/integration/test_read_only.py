"""Read-only and misplaced folders (issue 33 item 7): committed goldens are checked from a read-only checkout (reading
a golden writes nothing beside it); a dangling goldens link or a file where a folder belongs is one error naming the
path before anything runs; a read-only cache is skipped with one warning; a read-only goldens folder that lacks a
golden says so in full once.

Root is not stopped by ``chmod``, so a folder is made read-only with a read-only bind mount (skipped, with the
reason, where mounting is not permitted); the lock's place is also checked without a mount.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import harness.core.locks
from harness.core.errors import NotWritable
from harness.core.files import atomic_write
from harness.core.folders import check_folder
from harness.data.goldens import Golden, GoldenStore
from harness.data.models import resolve_model
from harness.data.recipes import InputRecipe
from harness.pipeline.cache import CacheSkipped, ContentCache
from tests.helpers.graphs import mlp_model, save

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _not_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count how often a message is said; with CI set, pytest repeats each failure's message in its
    short summary (its own CI behaviour), so the runs they make are run as a user's terminal would."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)


pytestmark = pytest.mark.reliability
BASE = ("-p", "no:cacheprovider", "-p", "no:randomly", "--model", "models/mlp.onnx")
BASE += ("--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")
ARGS = (*BASE, "--precision", "fp16")
BOTH = (*BASE, "--precision", "fp16,bf16")
OWN_WARNINGS = ("-W", "ignore::pytest.PytestAssertRewriteWarning")  # see test_reliability.OWN_WARNINGS


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` read-only for everybody, root included (a read-only bind mount onto itself)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a read-only bind mount is not permitted here: {done.stderr.strip() or done.returncode}")
    try:
        with pytest.raises(OSError):
            (folder / ".probe").write_text("x")
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_reading_a_golden_takes_no_lock_in_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve_model(str(save(mlp_model(), tmp_path / "mlp.onnx")), search_dir=tmp_path)
    store, recipe = GoldenStore(tmp_path / "goldens"), InputRecipe(seed=3)
    golden = Golden(feeds=[{"x": spec_feed()}], outputs=[{"y": spec_feed()}], meta={"producer": "test"})
    locks: list[Path] = []
    real = harness.core.locks._lock
    monkeypatch.setattr(harness.core.locks, "_lock", lambda path: locks.append(Path(path)) or real(path))
    store.write(spec, recipe, golden)
    before = sorted(p.name for p in (tmp_path / "goldens" / "mlp").iterdir())
    store.load(spec, recipe)
    assert locks and not any(lock.resolve().is_relative_to((tmp_path / "goldens").resolve()) for lock in locks)
    assert (
        sorted(p.name for p in (tmp_path / "goldens" / "mlp").iterdir())
        == before
        == [
            f"{recipe.id}.json",
            f"{recipe.id}.npz",
        ]
    )


def spec_feed() -> object:
    import numpy as np

    return np.ones((1, 8), np.float32)


def test_a_read_only_checkout_checks_its_committed_goldens(pytester: pytest.Pytester) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    pytester.runpytest(*ARGS).assert_outcomes(passed=1, failed=1)  # the golden is written once
    with read_only(pytester.path / "goldens"):
        result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=2)
    assert "Read-only file system" not in result.stdout.str()


def test_a_read_only_goldens_folder_without_the_golden_says_it_once(pytester: pytest.Pytester) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    with read_only(pytester.path / "goldens"):
        result = pytester.runpytest(*BOTH)
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out and "OSError" not in out
    assert out.count("cannot write here: Read-only file system; nothing was written") == 1
    assert out.count("no golden: cannot write here: Read-only file system (said in full once)") == 2
    assert "castguard: 2 cases: 2 error" in out


@pytest.mark.parametrize("misplaced", ["dangling link", "file"])
def test_a_misplaced_goldens_folder_is_one_error_naming_it(pytester: pytest.Pytester, misplaced: str) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    goldens = pytester.path / "goldens"
    if misplaced == "file":
        goldens.write_text("not a folder")
    else:
        goldens.symlink_to(pytester.path / "gone" / "goldens")
    result = pytester.runpytest(*ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "INTERNALERROR" not in err + result.stdout.str() and "Traceback" not in err
    assert err.count(f"{goldens}: the goldens folder (--goldens-dir)") == 1
    assert ("does not exist" if misplaced != "file" else "this is a file") in err


def test_a_file_on_the_way_to_the_report_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("x")
    with pytest.raises(NotWritable) as err:
        check_folder(tmp_path / "out" / "report", what="the report folder (--report-dir)")
    assert err.value.folder == tmp_path / "out" and f"on the way to {tmp_path / 'out' / 'report'}" in str(err.value)
    with pytest.raises(NotWritable, match="this is a file"):
        atomic_write(tmp_path / "out" / "report" / "a.json", b"{}")


def test_a_read_only_cache_is_skipped_with_one_warning(pytester: pytest.Pytester) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    pytester.runpytest(*ARGS).assert_outcomes(passed=1, failed=1)
    cache = pytester.path / "ro-cache"
    with read_only(cache):
        result = pytester.runpytest(*BOTH, "--cache-dir", str(cache), *OWN_WARNINGS)
    result.assert_outcomes(passed=3, warnings=1)
    out = result.stdout.str()
    assert out.count("CacheSkipped: castguard cache skipped:") == 1 and str(cache) in out


def test_a_cache_folder_that_is_a_file_is_skipped_with_one_warning(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("x")
    with pytest.warns(CacheSkipped, match="this is a file") as said:
        cache = ContentCache(tmp_path / "cache")
        first = cache.json_entry("trt-build", "k", lambda: {"a": 1})
        second = cache.json_entry("trt-build", "k", lambda: {"a": 2})
    assert first == ({"a": 1}, False) and second == ({"a": 2}, False) and len(said) == 1


def test_a_corrupt_cache_entry_is_rebuilt(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path)
    cache.json_entry("trt-build", "k", lambda: {"a": 1})
    (tmp_path / "trt-build" / "k.json").write_text("{not json")
    with pytest.warns(CacheSkipped, match="unreadable cache entry"):
        assert cache.json_entry("trt-build", "k", lambda: {"a": 2}) == ({"a": 2}, False)
    assert cache.json_entry("trt-build", "k", lambda: {"a": 3}) == ({"a": 2}, True)


@pytest.mark.parametrize(("folder", "option"), [("castguard-report", ()), ("hist", ("--history", "hist"))])
def test_a_read_only_report_or_history_folder_is_one_error_before_anything_runs(
    pytester: pytest.Pytester, folder: str, option: tuple[str, ...]
) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    with read_only(pytester.path / folder):
        result = pytester.runpytest(*ARGS, *option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "INTERNALERROR" not in err + result.stdout.str() and "Traceback" not in err
    assert err.count(f"{pytester.path / folder}: the ") == 1 and "Read-only file system" in err
