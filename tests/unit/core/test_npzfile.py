"""harness.core.npzfile: the one-pass reader gives what np.load gives, hashes what sha256_file hashes, and refuses
what np.load(allow_pickle=False) refuses."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from harness.core.files import sha256_file
from harness.core.npzfile import read_npz, release_pages, save_npz

ARRAYS = {
    "c": np.arange(12.0).reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)),
    "empty": np.empty((0, 5), np.float32),
    "scalar": np.float32(3.5),
    "big_endian": np.arange(10, dtype=">u2"),
    "large": np.random.default_rng(0).standard_normal(300_000),
    "bool": np.array([True, False]),
    "out/0/logits": np.linspace(-1, 1, 64, dtype=np.float16).reshape(2, 32),
}


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_every_array_reads_back_as_np_load_gives_it_and_the_hash_is_the_file_s(tmp_path: Path, save: object) -> None:
    path = tmp_path / "a b.npz"
    save(path, **ARRAYS)  # type: ignore[operator]
    arrays, digest = read_npz(path, with_sha256=True)
    assert digest == sha256_file(path)
    with np.load(path, allow_pickle=False) as expected:
        assert sorted(arrays) == sorted(expected.files)
        for name in expected.files:
            got, want = arrays[name], expected[name]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert np.array_equal(got, want), name
            assert got.flags.f_contiguous == want.flags.f_contiguous, name
    assert read_npz(path)[1] is None


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.npz"
    np.savez(path, **ARRAYS)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 30, 100):
        path.write_bytes(data[:cut])
        with pytest.raises((zipfile.BadZipFile, ValueError, EOFError)):
            read_npz(path, with_sha256=True)


def test_a_stored_member_shorter_than_its_header_says_is_refused(tmp_path: Path) -> None:
    """A member whose .npy header claims more data than the zip member holds (a hand-edited file)."""
    path = tmp_path / "t.npz"
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (100,)})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("x.npy", header.getvalue() + np.zeros(10).tobytes())
    with pytest.raises(ValueError, match="do not hold"):
        read_npz(path)


def test_pickled_arrays_are_never_loaded(tmp_path: Path) -> None:
    path = tmp_path / "o.npz"
    np.savez(path, o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="Python objects"):
        read_npz(path)


def test_a_changed_byte_in_a_stored_array_fails_its_crc_unless_the_caller_hashes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.npz"
    np.savez(path, big=np.zeros(100_000))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(zipfile.BadZipFile, match="CRC"):
        read_npz(path)
    arrays, digest = read_npz(path, with_sha256=True)  # the sha256 differs: the golden's sidecar check refuses it
    assert digest == sha256_file(path) and np.count_nonzero(arrays["big"]) == 1


def test_save_npz_writes_what_np_savez_writes(tmp_path: Path) -> None:
    """Every array comes back from np.load and from read_npz (its CRC checked) as np.savez's file gives it."""
    ours, numpys = tmp_path / "ours.npz", tmp_path / "numpy.npz"
    arrays = {**ARRAYS, "strided": np.arange(20.0)[::2], "list": [1, 2, 3]}
    save_npz(ours, arrays)
    np.savez(numpys, **arrays)  # type: ignore[arg-type]
    with np.load(ours, allow_pickle=False) as got, np.load(numpys, allow_pickle=False) as want:
        assert sorted(got.files) == sorted(want.files)
        for name in want.files:
            assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
            assert np.array_equal(got[name], want[name]), name
            assert got[name].flags.f_contiguous == want[name].flags.f_contiguous, name
    read, _ = read_npz(ours)
    assert all(np.array_equal(read[name], np.asarray(value)) for name, value in arrays.items())


def _resident_file_kb() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def test_a_golden_s_large_output_is_a_view_of_its_file_whose_pages_can_be_let_go(tmp_path: Path) -> None:
    """The goldens align a stored member's data (a zip extra field), so that read_npz(mapped=True) maps it: equal
    values, read-only, hashed as the file; release_pages takes its pages out of the process's memory."""
    from harness.data.goldens import Golden, GoldenStore
    from harness.data.models import resolve_model
    from harness.data.recipes import InputRecipe
    from tests.helpers.graphs import mlp_model, save

    spec = resolve_model(str(save(mlp_model(), tmp_path / "m.onnx")), search_dir=tmp_path)
    store, recipe = GoldenStore(tmp_path / "goldens"), InputRecipe(seed=1, iterations=1)
    logits = np.random.default_rng(0).standard_normal((4, 64, 16_384)).astype(np.float32)  # 16.8 MB: stored
    store.write(
        spec,
        recipe,
        Golden(feeds=[{"x": np.zeros(3, np.float32)}], outputs=[{"logits": logits}], meta={"producer": "ort"}),
    )
    path = store.path_for(spec, recipe)
    arrays, digest = read_npz(path, with_sha256=True, mapped=True)
    mapped = arrays["output/0/logits"]
    assert digest == sha256_file(path) and not mapped.flags.writeable and mapped.flags.aligned
    assert np.array_equal(mapped, logits)
    before = _resident_file_kb()
    release_pages(arrays.values())
    after = _resident_file_kb()
    if before is not None and after is not None:
        assert before - after >= logits.nbytes // 1024 // 2  # most of its pages let go
    assert np.array_equal(mapped, logits)  # read again from the file when used
    golden = store.load(spec, recipe)
    assert not golden.outputs[0]["logits"].flags.writeable and np.array_equal(golden.outputs[0]["logits"], logits)
    unaligned = tmp_path / "plain.npz"
    np.savez(unaligned, logits=logits)  # np.savez does not align: read into memory as before
    assert read_npz(unaligned, mapped=True)[0]["logits"].flags.writeable
