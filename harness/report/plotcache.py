"""The report's plots, cached by content: a warm run whose plotted data did not change imports no matplotlib.

A plot is a pure function of its spec (:mod:`harness.report.plotdata`: exactly the fields it draws, its title),
so its PNG is kept in castguard's cache folder (``--cache-dir``, ``.castguard-cache/`` by default) as
``plots/<key>.png``, where the key is the sha256 of the spec's kind and fields, of the versions of matplotlib,
Pillow (which encodes the PNG) and castguard, and of the drawing modules' source. A spec that differs in any drawn
field is another key, so a stale plot is never served; a hit is the bytes a fresh draw of the same spec gives.

Like :class:`harness.pipeline.cache.ContentCache` (the same folder, its ``.gitignore`` and its size cap:
:mod:`harness.pipeline.cache_size` counts and evicts ``plots/`` entries) the cache is optional and never silent:

* an entry is written atomically (:func:`harness.core.files.atomic_write`), so readers never see a partial file;
* an entry whose PNG does not check out (signature, every chunk's CRC, the end chunk) is drawn again and
  replaced, with one :class:`~harness.core.cachenotes.CacheSkipped` warning naming it;
* a cache folder that cannot be used (a file in its place, read-only, full) is skipped for the rest of the
  report with one warning, and every plot is drawn;
* no folder (``PlotCache(None)``: ``castguard merge``, the ``castguard`` fixture's own cases, a report
  rendered outside a run) draws every plot.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from harness.core.cachenotes import CacheNotes
from harness.core.errors import UserError
from harness.core.files import atomic_write, own_folder
from harness.core.version import __version__
from harness.data.keys import content_key
from harness.report.plotdata import PlotSpec

SECTION = "plots"
REDRAWN = "; the plot was drawn again and the entry replaced"
DRAWING_MODULES = ("plots.py", "charts.py", "plotstyle.py")  # what draws a spec (harness/report/)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PlotCache:
    """Draws a plot's PNG, or reads it from ``root/plots/`` when the same spec was drawn before (see the module)."""

    def __init__(self, notes: CacheNotes | None) -> None:
        """``notes``: the cache folder's state and voice (:mod:`harness.core.cachenotes`), shared with the run's
        content cache, so that one problem with the folder is said once; None: no cache, every plot is drawn."""
        self.notes = notes
        self.drawn = 0  # plots drawn by this object (a miss, a broken entry, no cache)
        self._versions: dict[str, str] | None = None  # of what draws the plots: read once, at the first look-up

    def png(self, spec: PlotSpec) -> bytes:
        """The PNG of ``spec``: the cached entry when there is a sound one, else drawn now (and stored)."""
        notes = self.notes if self.notes is not None and self.notes.skipped is None else None
        path = None if notes is None else notes.root / SECTION / f"{self._key(spec)}.png"
        if path is not None and notes is not None:
            cached = self._read(path, notes)
            if cached is not None:
                return cached
        from harness.report.plots import draw_png  # matplotlib: imported only to draw

        data = draw_png(spec)
        self.drawn += 1
        if path is not None and notes is not None:
            self._store(path, data, notes)
        return data

    def _key(self, spec: PlotSpec) -> str:
        self._versions = self._versions or drawing_versions()
        return plot_key(spec, versions=self._versions)

    def _read(self, path: Path, notes: CacheNotes) -> bytes | None:
        """A sound entry's bytes (marked as used now, for the size cap's eviction); None: none, or a broken one."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            notes.say(notes.corrupt(path, err.strerror or err, then=REDRAWN))
            return None
        why = png_problem(data)
        if why is not None:
            notes.say(notes.corrupt(path, why, then=REDRAWN))
            return None
        try:
            path.touch()
        except OSError:
            pass  # only the eviction order depends on it; the entry is sound
        return data

    def _store(self, path: Path, data: bytes, notes: CacheNotes) -> None:
        try:
            own_folder(notes.root)  # castguard's own folder gets its `*` .gitignore
            atomic_write(path, data)
        except (UserError, OSError) as err:
            notes.skip(err, goes_on="the report's plots are drawn without the cache")


def plot_key(spec: PlotSpec, *, versions: Mapping[str, str]) -> str:
    """The content key of a plot (:func:`harness.data.keys.content_key`): its kind, every drawn field, and what
    else draws it (:func:`drawing_versions`)."""
    fields = json.dumps(asdict(spec), sort_keys=True)
    return content_key("plot", type(spec).__name__, fields, json.dumps(dict(versions), sort_keys=True))


def drawing_versions() -> dict[str, str]:
    """What a plot's PNG depends on besides its spec: the versions of matplotlib and Pillow (read from the installed
    metadata: no import), castguard's, and a hash of the drawing modules' source (an edited chart misses, as an
    edited converter does in :func:`harness.data.keys.code_fingerprint`)."""
    digest = hashlib.sha256()
    for name in DRAWING_MODULES:
        digest.update((Path(__file__).parent / name).read_bytes())
    return {
        "matplotlib": _version("matplotlib"),
        "pillow": _version("pillow"),
        "castguard": __version__,
        "drawing_source": digest.hexdigest(),
    }


def png_problem(data: bytes) -> str | None:
    """Why ``data`` is not a whole PNG file (signature, each chunk's length and CRC, the closing IEND), or None."""
    if not data.startswith(PNG_SIGNATURE):
        return "not a PNG file"
    pos = len(PNG_SIGNATURE)
    while pos + 12 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        end = pos + 12 + length
        if end > len(data):
            return "truncated"
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(data[pos + 4 : end - 4]) != crc:
            return f"bad CRC in chunk at byte {pos}"
        if data[pos + 4 : pos + 8] == b"IEND":
            return None if end == len(data) else "data after the end chunk"
        pos = end
    return "truncated"


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "none"
