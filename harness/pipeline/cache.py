"""Content-hash caches for a sweep's deterministic work: tensor magnitudes and converted models.

Layout under the cache root (``.castguard-cache/`` in the rootdir by default; safe to delete)::

    magnitudes/<key>.json            Magnitudes.to_json()
    convert/<key>.onnx               the converted model (+ <key>.onnx.data: its weights, for lazy/big models
                                     whose weights changed; unchanged ones are read from the source's folder)
    convert/<key>.json               the rest of the ConversionResult, with the .onnx file's sha256
    trt-build/<key>.json             a TensorRT build check (harness.pipeline.build_check), keyed by the converted model
    plots/<key>.png                  a report plot (harness.report.plotcache), keyed by exactly what it draws

A key is the sha256 of everything the result depends on (:func:`harness.data.keys.content_key`): the model's sha256, a
digest of the feeds (``feeds_digest``), the options, and ``code_fingerprint`` (castguard's
version and the converter's source), so a changed model, input set, option or converter never reuses an
entry, and a re-run with nothing changed skips the work.

Size: every read touches the entry's files, and :func:`harness.pipeline.cache_size.evict` deletes the least recently
used entries beyond ``cache_max_mb`` (pyproject, default 2048) at the end of a run; ``castguard cache`` shows and
prunes it.

Concurrency (pytest-xdist): each entry is produced under an exclusive :mod:`harness.core.locks` lock on ``<key>.lock``
(the kernel drops it if its holder dies), so two workers never compute the same entry twice; files are written
to a temporary name in the same folder and renamed into place, so readers never see a partial file.

The cache is optional: a corrupt entry is rebuilt, and a cache folder that cannot be written (read-only, full, a
file in its place) is skipped for the rest of the process; each says so once, as a :class:`CacheSkipped` warning,
and every case goes on without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from harness.convert import ConversionResult, Magnitudes
from harness.core.cachenotes import CacheNotes, CacheSkipped
from harness.core.errors import InputDataError, ModelError, UserError
from harness.core.files import atomic_write, own_folder, sha256_file
from harness.core.jsonfile import JsonObject
from harness.core.locks import held
from harness.data.keys import SCHEMA_VERSION, code_fingerprint
from harness.data.onnxfile import (
    EXTERNAL_DATA_ABOVE,
    ParsedModel,
    has_pending_casts,
    model_sha256,
    parse_model,
    read_weights,
    weights_size,
)
from harness.data.onnxsave import save_model
from harness.pipeline.cache_size import touch

T = TypeVar("T")

__all__ = ["CacheSkipped", "ContentCache"]


class ContentCache:
    """Reads and writes cache entries under ``root``; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fingerprint = code_fingerprint()
        self.notes = CacheNotes(root)  # the skipped state and the warnings (harness.core.cachenotes)

    @property
    def skipped(self) -> UserError | None:
        return self.notes.skipped

    def _store(self, path: Path, data: bytes) -> None:
        """Write an entry; a folder that cannot be written skips the cache from now on (one warning)."""
        if self.skipped is not None:
            return
        try:
            atomic_write(path, data)
        except (UserError, OSError) as err:
            self.notes.skip(err)

    def magnitudes(self, key: str, make: Callable[[], Magnitudes]) -> tuple[Magnitudes, bool]:
        """The cached magnitudes for ``key``, or ``make()`` them and store them; second item: cache hit."""
        path = self.root / "magnitudes" / f"{key}.json"
        with self._locked(path) as usable:
            if usable and path.is_file():
                touch((path,))  # least-recently-used eviction (harness.pipeline.cache_size) reads mtimes
                try:
                    return Magnitudes.from_json(path.read_text(encoding="utf-8")), True
                except (InputDataError, UnicodeDecodeError, OSError) as err:
                    self.notes.say(self.notes.corrupt(path, err))
            made = make()
            self._store(path, made.to_json().encode())
            return made, False

    def json_entry(
        self, folder: str, key: str, make: Callable[[], dict[str, Any] | None]
    ) -> tuple[dict[str, Any] | None, bool]:
        """The JSON object cached under ``folder/key``, or ``make()`` it and store it (None: nothing to keep, e.g. a
        result that may not repeat); second item: cache hit."""
        path = self.root / folder / f"{key}.json"
        with self._locked(path) as usable:
            if usable and path.is_file():
                touch((path,))
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError, OSError) as err:
                    data = err
                if isinstance(data, dict):
                    return data, True
                self.notes.say(
                    self.notes.corrupt(path, data if isinstance(data, Exception) else ValueError("not an object"))
                )
            made = make()
            if made is not None:
                self._store(path, json.dumps(made, sort_keys=True).encode())
            return made, False

    def conversion(
        self, key: str, make: Callable[[], ConversionResult], *, weights_dir: Path | None = None
    ) -> tuple[ConversionResult, bool]:
        """The cached conversion for ``key``, or ``make()`` it and store it; second item: cache hit.

        Lazy models: converted weights are streamed into ``<key>.onnx.data`` and runners read them there. A
        conversion that leaves every external weight as it was stores only its graph and reads the weights from
        `weights_dir`, the source model's folder (no copy; the key covers the source's sha256, data included).
        """
        model_path = self.root / "convert" / f"{key}.onnx"
        meta_path = model_path.with_suffix(".json")
        with self._locked(model_path) as usable:
            if usable and meta_path.is_file():
                touch((model_path, meta_path, model_path.with_name(model_path.name + ".data")))
                try:
                    return self._read_conversion(model_path, meta_path, weights_dir), True
                except UserError as err:
                    self.notes.say(err)
            made = make()
            if not usable:
                return made, False
            try:
                return self._store_conversion(made, model_path, weights_dir), False
            except (UserError, OSError) as err:
                self.notes.skip(err)
                return made, False

    def _store_conversion(self, made: ConversionResult, model_path: Path, weights_dir: Path | None) -> ConversionResult:
        """Write a conversion entry; the result to hand out (lazy and big models: read back from the entry)."""
        meta_path = model_path.with_suffix(".json")
        by_reference = made.base_dir is not None and weights_dir is not None and not has_pending_casts(made.model)
        if by_reference:
            atomic_write(model_path, made.model.SerializeToString())  # the graph; weights stay at the source
        else:
            save_model(made.model, model_path, base_dir=made.base_dir)  # lazy: weights streamed, converted
        meta = {
            "schema_version": SCHEMA_VERSION,
            "low_nodes": list(made.low_nodes),
            "onnx_sha256": sha256_file(model_path) if by_reference else model_sha256(model_path),
            "weights": "source" if by_reference else "entry",
            "high_nodes": [list(pair) for pair in made.high_nodes],
            "lowp_flop_share": made.lowp_flop_share,
            "lowp_share_bound": made.lowp_share_bound,
            "cast_held_share": made.cast_held_share,
            "cast_count": made.cast_count,
            "clamped": list(made.clamped),
            "notes": list(made.notes),
        }
        atomic_write(meta_path, json.dumps(meta, sort_keys=True).encode())
        if made.base_dir is None and weights_size(made.model) <= EXTERNAL_DATA_ABOVE:
            return made  # all in memory and in one file
        return self._read_conversion(model_path, meta_path, weights_dir)

    def _read_conversion(self, model_path: Path, meta_path: Path, weights_dir: Path | None) -> ConversionResult:
        """The entry, its sha256 (streamed, data file included) checked; big weights stay in their file."""
        fix = f"delete the cache folder {self.root}; castguard rebuilds it"
        meta = JsonObject.read(meta_path, what="cache entry", fix=fix)
        try:
            by_reference = meta.get("weights", str, "entry") == "source"
            if by_reference and weights_dir is None:
                raise ValueError("the entry reads its weights from the source model's folder, which was not given")
            parsed, digest = _parsed_and_sha256(model_path, graph_only=by_reference)
            if meta.get("schema_version", int) != SCHEMA_VERSION or meta.get("onnx_sha256", str) != digest:
                raise ValueError("schema version or model hash does not match")
            data_dir = weights_dir if by_reference else model_path.parent
            if parsed is None:  # its weights are the source's: parsed against the source's folder
                parsed = parse_model(model_path, data_dir=data_dir)
            model = read_weights(parsed, weights="lazy", check=False)  # parsed once, hashed, then its weights read
            return ConversionResult(
                model=model,
                low_nodes=tuple(meta.items("low_nodes", str)),
                high_nodes=tuple((str(a), str(b)) for a, b in meta.items("high_nodes", list)),
                lowp_flop_share=meta.get("lowp_flop_share", float),
                lowp_share_bound=meta.get("lowp_share_bound", str, None),
                cast_held_share=meta.get("cast_held_share", float, 0.0),
                cast_count=meta.get("cast_count", int),
                clamped=tuple(meta.items("clamped", str)),
                notes=tuple(meta.items("notes", str, default=[])),
                base_dir=data_dir if parsed.lazy else None,
            )
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, ModelError) as err:
            raise self.notes.corrupt(meta_path, err) from err

    @contextmanager
    def _locked(self, path: Path) -> Iterator[bool]:
        """Hold the entry's lock; yields whether the cache can be used (False: skipped, no lock taken)."""
        if self.skipped is None:
            try:
                own_folder(self.root)
                path.parent.mkdir(parents=True, exist_ok=True)
                lock = held(path.with_suffix(".lock"), what="cache entry lock")
                lock.__enter__()
            except (OSError, UserError) as err:
                self.notes.skip(err)
            else:
                try:
                    yield True
                finally:
                    lock.__exit__(None, None, None)
                return
        yield False


def _parsed_and_sha256(path: Path, *, graph_only: bool) -> tuple[ParsedModel | None, str | None]:
    """The entry's streamed sha256 (its data file included unless `graph_only`), None when it is unreadable, and
    its graph as :func:`~harness.data.onnxfile.parse_model` read it to find the data file (None with
    `graph_only`: nothing parsed), so that a hit parses the entry once."""
    try:
        if graph_only:
            return None, sha256_file(path)
        parsed = parse_model(path)
        return parsed, model_sha256(path, parsed=parsed)
    except (ModelError, OSError):
        return None, None
