"""The content-hash cache: keys, hits and misses, round trips, corrupt entries, concurrent processes."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import numpy as np
import pytest

from harness.convert import ConversionResult, ConvertOptions, Magnitudes, collect_magnitudes, convert
from harness.data.keys import code_fingerprint, content_key, feeds_digest
from harness.pipeline.cache import CacheSkipped, ContentCache
from tests.helpers.graphs import mlp_model

MAGS = Magnitudes(absmax={"x": 1.5, "y": float("inf")}, shapes={"x": (1, 4)}, dtypes={"x": 1}, data_source="test")


def test_keys_are_stable_and_sensitive() -> None:
    assert content_key("a", "b") == content_key("a", "b")
    assert content_key("a", "b") != content_key("ab") != content_key("a", "b", "")
    feed = {"x": np.arange(4, dtype=np.float32)}
    assert feeds_digest([feed]) == feeds_digest([{"x": np.arange(4, dtype=np.float32)}])
    assert feeds_digest([feed]) != feeds_digest([{"x": np.arange(4, dtype=np.float64)}])
    assert feeds_digest([feed]) != feeds_digest([{"x": np.arange(4, dtype=np.float32).reshape(2, 2)}])
    assert feeds_digest([feed]) != feeds_digest([feed, feed])
    assert code_fingerprint() == code_fingerprint()


def test_magnitudes_are_made_once_then_read(tmp_path: Path) -> None:
    calls: list[int] = []

    def make() -> Magnitudes:
        calls.append(1)
        return MAGS

    cache = ContentCache(tmp_path)
    first, hit1 = cache.magnitudes("k", make)
    second, hit2 = ContentCache(tmp_path).magnitudes("k", make)
    assert (hit1, hit2, len(calls)) == (False, True, 1)
    assert second == first == MAGS


def test_conversion_round_trips(tmp_path: Path) -> None:
    model = mlp_model()
    made = convert(model, options=ConvertOptions(keep_io_types=True), magnitudes=collect_magnitudes(model))
    cache = ContentCache(tmp_path)
    assert cache.conversion("k", lambda: made) == (made, False)
    read, hit = cache.conversion("k", lambda: pytest.fail("must not convert again"))
    assert hit and read.model.SerializeToString() == made.model.SerializeToString()
    assert (read.low_nodes, read.high_nodes, read.lowp_flop_share, read.cast_count, read.clamped) == (
        made.low_nodes,
        made.high_nodes,
        made.lowp_flop_share,
        made.cast_count,
        made.clamped,
    )


def test_a_corrupt_entry_is_rebuilt_with_one_warning_naming_the_fix(tmp_path: Path) -> None:
    """The cache is optional (issue 33 item 14): a corrupt entry is said once and rebuilt, never a case's error."""
    cache = ContentCache(tmp_path)
    cache.magnitudes("k", lambda: MAGS)
    (tmp_path / "magnitudes" / "k.json").write_text("{not json")
    with pytest.warns(CacheSkipped, match="unreadable cache entry") as said:
        assert cache.magnitudes("k", lambda: MAGS) == (MAGS, False)
    assert str(tmp_path) in str(said[0].message)
    assert cache.magnitudes("k", lambda: pytest.fail("rebuilt entry must be read")) == (MAGS, True)
    model = mlp_model()
    cache.conversion("c", lambda: convert(model, options=ConvertOptions(), magnitudes=None))
    (tmp_path / "convert" / "c.onnx").write_bytes(b"garbage")
    with pytest.warns(CacheSkipped, match="model hash does not match"):
        again, hit = cache.conversion("c", lambda: convert(model, options=ConvertOptions(), magnitudes=None))
    assert not hit and again.model.graph.node
    assert cache.conversion("c", lambda: pytest.fail("rebuilt entry must be read"))[1]


def _slow_make(root: str, marker_dir: str) -> None:
    def make() -> Magnitudes:
        Path(marker_dir, f"{multiprocessing.current_process().pid}").touch()
        time.sleep(0.3)
        return MAGS

    assert ContentCache(Path(root)).magnitudes("shared", make)[0] == MAGS


def test_concurrent_processes_compute_an_entry_once(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_slow_make, args=(str(tmp_path / "cache"), str(markers))) for _ in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(list(markers.iterdir())) == 1
    assert not list((tmp_path / "cache" / "magnitudes").glob("*.tmp"))


def test_results_are_identical_to_an_uncached_conversion(tmp_path: Path) -> None:
    model = mlp_model()
    options = ConvertOptions(low_precision_type="bf16", keep_io_types=True)
    direct: ConversionResult = convert(model, options=options, magnitudes=None)
    cached, _ = ContentCache(tmp_path).conversion("k", lambda: convert(model, options=options, magnitudes=None))
    assert cached.model.SerializeToString() == direct.model.SerializeToString()
