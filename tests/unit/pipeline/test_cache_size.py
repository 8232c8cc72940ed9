"""The cache's size cap: least-recently-used eviction, entries in use are never deleted, `castguard cache`."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from harness.pipeline.cache_size import MB, evict, evict_note, usage


def _entry(root: Path, section: str, key: str, size: int, used: float) -> None:
    folder = root / section
    folder.mkdir(parents=True, exist_ok=True)
    suffixes = (".onnx", ".json") if section == "convert" else (".json",)
    for suffix in suffixes:
        path = folder / f"{key}{suffix}"
        path.write_bytes(b"x" * (size // len(suffixes)))
        os.utime(path, (used, used))
    (folder / f"{key}.lock").touch()


def test_least_recently_used_entries_go_first_until_the_cache_fits(tmp_path: Path) -> None:
    for index, key in enumerate(["old", "mid", "new"]):
        _entry(tmp_path, "convert", key, 1000, used=1_000_000 + index)
    _entry(tmp_path, "magnitudes", "mags", 100, used=900_000)  # the oldest of all
    sizes = {e.key: e.size for e in usage(tmp_path).entries}
    assert sizes["old"] >= 1000 and usage(tmp_path).size == sum(sizes.values())  # bytes on disk, as du counts
    gone = evict(tmp_path, max_bytes=sizes["new"])
    assert [e.key for e in gone] == ["mags", "old", "mid"]
    assert sorted(p.name for p in (tmp_path / "convert").iterdir()) == ["new.json", "new.lock", "new.onnx"]
    assert evict(tmp_path, max_bytes=sizes["new"]) == ()


def test_an_entry_in_use_is_never_evicted(tmp_path: Path) -> None:
    _entry(tmp_path, "convert", "busy", 1000, used=1)
    _entry(tmp_path, "convert", "idle", 1000, used=2)
    with open(tmp_path / "convert" / "busy.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # a running case holds it
        gone = evict(tmp_path, max_bytes=0)
    assert [e.key for e in gone] == ["idle"] and (tmp_path / "convert" / "busy.onnx").exists()


def test_a_cache_hit_marks_the_entry_as_used(tmp_path: Path) -> None:
    from harness.convert import Magnitudes
    from harness.pipeline.cache import ContentCache

    cache = ContentCache(tmp_path)
    made = Magnitudes(absmax={"x": 1.0}, shapes={"x": (1,)}, dtypes={"x": 1}, data_source="test")
    cache.magnitudes("k", lambda: made)
    path = tmp_path / "magnitudes" / "k.json"
    os.utime(path, (1, 1))
    _, hit = cache.magnitudes("k", lambda: made)
    assert hit and path.stat().st_mtime > 1


def test_the_end_of_run_note_and_no_cap(tmp_path: Path) -> None:
    _entry(tmp_path, "convert", "a", 2 * MB, used=1)
    assert evict_note(tmp_path, max_mb=0) == ""  # 0: no cap
    assert evict_note(tmp_path, max_mb=4) == ""  # fits
    note = evict_note(tmp_path, max_mb=1)
    assert "was over 1 MB: evicted 1 least recently used entries (2.0 MB)" in note


def test_castguard_cache_shows_and_prunes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.castguard]\ncache_max_mb = 1\nkeep_runs = 1\n")
    for index in range(3):
        _entry(tmp_path / ".castguard-cache", "convert", f"k{index}", MB, used=index + 1)
    for name in ("20261101T000000Z-1-aaaa", "20261102T000000Z-1-bbbb"):
        (tmp_path / "castguard-report" / "runs" / name).mkdir(parents=True)
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "3.0 MB in 3 entries (cap 1 MB)" in out and "in 2 run folder(s) (keep 1)" in out
    assert main(["cache", "--prune"]) == 0
    out = capsys.readouterr().out
    assert "pruned: 2 cache entries (2.0 MB) beyond 1 MB" in out
    assert "pruned: 1 old run folder(s)" in out and "in 1 run folder(s) (keep 1)" in out
    assert main(["cache", "--prune", "--max-mb=-1"]) == 2
    assert "cache_max_mb: must be >= 0" in capsys.readouterr().err
