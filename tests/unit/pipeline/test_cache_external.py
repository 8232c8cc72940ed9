"""Cache entries for lazily loaded models: weights streamed (converted) or hard-linked (unchanged), never read
whole into memory; a hit runs from the entry's own folder; a damaged data file is an error naming the fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.convert import ConvertOptions, convert
from harness.data.onnxfile import external_tensors, has_pending_casts, load_model
from harness.pipeline.cache import CacheSkipped, ContentCache
from harness.runners import make_runner
from tests.helpers.external import matmul_stack, save_external

FEED = {"x": np.random.default_rng(5).standard_normal((1, 512)).astype(np.float32)}


@pytest.fixture
def ext_path(tmp_path: Path) -> Path:
    return save_external(matmul_stack(), tmp_path / "m" / "stack.onnx")


def _lazy_conversion(ext_path: Path, options: ConvertOptions):  # type: ignore[no-untyped-def]
    return lambda: convert(
        load_model(ext_path, weights="lazy"), options=options, magnitudes=None, base_dir=ext_path.parent
    )


def test_a_converted_lazy_model_is_stored_as_external_data_and_run_from_the_entry(
    ext_path: Path, tmp_path: Path
) -> None:
    cache = ContentCache(tmp_path / "cache")
    options = ConvertOptions(data_max=float("inf"), keep_io_types=True)
    made, hit = cache.conversion("k", _lazy_conversion(ext_path, options))
    again, hit2 = ContentCache(tmp_path / "cache").conversion("k", _lazy_conversion(ext_path, options))
    entry = tmp_path / "cache" / "convert" / "k.onnx"
    assert (hit, hit2) == (False, True) and made.base_dir == again.base_dir == entry.parent
    assert not has_pending_casts(made.model) and len(external_tensors(again.model)) == 4
    assert entry.with_name("k.onnx.data").stat().st_ino != ext_path.with_name("weights.bin").stat().st_ino
    want = make_runner("emulate", convert(load_model(ext_path), options=options, magnitudes=None).model).run([FEED])
    got = make_runner("emulate", again.model, model_dir=again.base_dir).run([FEED])
    np.testing.assert_array_equal(got.outputs[0]["y"], want.outputs[0]["y"])


def test_unchanged_weights_are_read_from_the_source_not_copied(ext_path: Path, tmp_path: Path) -> None:
    options = ConvertOptions(data_max=float("inf"), op_types_to_exclude=("MatMul",), keep_io_types=True)
    folder = ext_path.parent
    made, hit = ContentCache(tmp_path / "cache").conversion(
        "fp32", _lazy_conversion(ext_path, options), weights_dir=folder
    )
    again, hit2 = ContentCache(tmp_path / "cache").conversion(
        "fp32", _lazy_conversion(ext_path, options), weights_dir=folder
    )
    assert (hit, hit2) == (False, True) and made.base_dir == again.base_dir == folder
    assert sorted(p.name for p in (tmp_path / "cache" / "convert").iterdir()) == [
        "fp32.json",
        "fp32.lock",
        "fp32.onnx",
    ]  # no data copy
    assert (tmp_path / "cache" / "convert" / "fp32.onnx").stat().st_size < 10_000
    got = make_runner("ort", again.model, model_dir=again.base_dir).run([FEED]).outputs[0]["y"]
    want = make_runner("ort", load_model(ext_path)).run([FEED]).outputs[0]["y"]
    np.testing.assert_array_equal(got, want)
    with pytest.warns(CacheSkipped, match="source model's folder, which was not given"):  # rebuilt
        assert not ContentCache(tmp_path / "cache").conversion("fp32", _lazy_conversion(ext_path, options))[1]


def test_a_damaged_entry_data_file_is_an_error_naming_the_fix(ext_path: Path, tmp_path: Path) -> None:
    options = ConvertOptions(data_max=float("inf"))
    ContentCache(tmp_path / "cache").conversion("k", _lazy_conversion(ext_path, options))
    data = tmp_path / "cache" / "convert" / "k.onnx.data"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.warns(CacheSkipped, match="unreadable cache entry") as said:  # rebuilt, said once
        assert not ContentCache(tmp_path / "cache").conversion("k", _lazy_conversion(ext_path, options))[1]
    assert "delete the cache folder" in str(said[0].message)
    assert ContentCache(tmp_path / "cache").conversion("k", _lazy_conversion(ext_path, options))[1]


def test_the_data_file_belongs_to_its_entry_for_the_size_cap(ext_path: Path, tmp_path: Path) -> None:
    from harness.pipeline.cache_size import evict, usage

    root = tmp_path / "cache"
    options = ConvertOptions(data_max=float("inf"))
    ContentCache(root).conversion("k", _lazy_conversion(ext_path, options))
    (entry,) = usage(root).entries
    assert entry.key == "k" and [p.name for p in entry.files] == ["k.json", "k.onnx", "k.onnx.data"]
    assert entry.size >= (root / "convert" / "k.onnx.data").stat().st_size
    evict(root, max_bytes=0)
    assert list((root / "convert").iterdir()) == []  # all of it went, together
