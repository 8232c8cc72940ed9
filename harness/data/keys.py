"""Content keys: stable hashes of what a cached result depends on (the content cache and the tune cache share them).

A key is the sha256 of an ordered list of strings (:func:`content_key`); :func:`feeds_digest` hashes feeds and
:func:`code_fingerprint` castguard's version and converter source, so a changed model, input set, option or
converter never reuses an entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from harness.core.version import __version__

SCHEMA_VERSION = 1


def content_key(*parts: str) -> str:
    """A stable hex key for an ordered list of strings (no separator ambiguity: hashed as JSON)."""
    return hashlib.sha256(json.dumps([SCHEMA_VERSION, *parts]).encode()).hexdigest()


def feeds_digest(feeds: Sequence[Mapping[str, np.ndarray]]) -> str:
    """sha256 of every feed's names, dtypes, shapes and bytes, in iteration order."""
    digest = hashlib.sha256()
    for index, feed in enumerate(feeds):
        for name in sorted(feed):
            array = np.ascontiguousarray(feed[name])
            digest.update(f"{index}/{name}/{array.dtype.str}/{array.shape}".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


def code_fingerprint() -> str:
    """castguard's version plus a hash of the converter's source files, so an edited converter misses."""
    digest = hashlib.sha256(__version__.encode())
    folder = Path(__file__).resolve().parents[1] / "convert"
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
