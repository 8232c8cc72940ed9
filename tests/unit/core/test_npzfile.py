"""harness.core.npzfile: the one-pass reader gives what np.load gives, hashes what sha256_file hashes, and refuses
what np.load(allow_pickle=False) refuses."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from harness.core.files import sha256_file
from harness.core.npzfile import read_npz, save_npz

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
