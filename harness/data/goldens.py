"""FP32 goldens: ``<root>/<model>/<inputs-id>.npz`` (feeds and outputs) plus a ``.json`` sidecar.

The ``.npz`` holds ``input/<i>/<name>`` and ``output/<i>/<name>`` for every iteration, written
deterministically (fixed zip timestamps, no pickle) so identical goldens are identical bytes; a member above
:data:`~harness.core.files.COMPRESS_MAX_BYTES` (large logits) is stored uncompressed, smaller ones deflated. bf16 arrays are
stored as their uint16 bits and listed in the sidecar. The sidecar records the schema version, the model's
sha256, library versions, the input recipe, the producer runner and the ``.npz`` sha256.

Writes are atomic (temp file in the same folder + ``os.replace``). :meth:`GoldenStore.locked` is an exclusive
:mod:`harness.core.locks` lock for the golden (freed by the system when its holder dies, deleted when released)
so that pytest-xdist workers do not race: the plugin checks, produces and writes under it, and
:meth:`GoldenStore.load` reads under it. The lock file lives outside the goldens folder
(:func:`harness.core.locks.lock_for`), so a read-only checkout's committed goldens are read without writing there.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import logging
import os
import re
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.dtypes import BFLOAT16, bits_to_bf16
from harness.core.errors import GoldenCorrupt, GoldenMissing, GoldenStale, ModelError
from harness.core.files import atomic_write, atomic_write_all, sha256_file
from harness.core.jsonfile import JsonObject
from harness.core.locks import held, lock_for
from harness.core.npzfile import read_npz, release_pages, save_npz_stable
from harness.data.models import ModelSpec
from harness.data.recipes import Feed, InputRecipe
from harness.data.rerun import large_golden_warning, rerun_command

SCHEMA_VERSION = 1
LOG = logging.getLogger("harness.data")
"""A golden above this warns before it is written (8x512x32000 fp32 logits alone are 0.5 GB)."""
_KEY_RE = re.compile(r"^(input|output)/(\d+)/(.+)$")


@dataclass(frozen=True)
class Golden:
    """Exact feeds and FP32 outputs per iteration; ``meta`` is the sidecar (``producer`` is required to write).
    A golden read from its file holds its large outputs as read-only views of the file
    (:func:`harness.core.npzfile.read_npz` ``mapped``): :meth:`release` lets their pages go while a model runs."""

    feeds: list[Feed]
    outputs: list[dict[str, np.ndarray]]
    meta: dict[str, Any] = field(default_factory=dict)

    def release(self) -> None:
        """Let the pages of the file-mapped outputs go from memory (read again when next used); others stay."""
        release_pages(value for outputs in self.outputs for value in outputs.values())


def _versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    from harness.core.version import __version__

    return {
        "castguard": __version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
    }


class GoldenStore:
    """Reads and writes goldens under ``root``; see the module docstring for the layout."""

    def __init__(self, root: Path, *, lock_timeout_s: float = 300.0) -> None:
        self.root = root
        self.lock_timeout_s = lock_timeout_s

    def path_for(self, spec: ModelSpec, recipe: InputRecipe) -> Path:
        return self.root / spec.name / f"{recipe.id}.npz"

    @staticmethod
    def sidecar(path: Path) -> Path:
        return path.with_suffix(".json")

    @contextmanager
    def locked(self, spec: ModelSpec, recipe: InputRecipe) -> Iterator[None]:
        """Exclusive lock for one golden, shared by processes and xdist workers; its file is not in the goldens
        folder (:func:`~harness.core.locks.lock_for`), which may be read-only."""
        lock = lock_for(self.path_for(spec, recipe))
        with held(lock, timeout_s=self.lock_timeout_s, what="golden lock", remove=True):
            yield

    def load(self, spec: ModelSpec, recipe: InputRecipe) -> Golden:
        """The golden for (model, recipe). GoldenMissing / GoldenStale / GoldenCorrupt otherwise."""
        with self.locked(spec, recipe):
            return self.load_unlocked(spec, recipe)

    def write(self, spec: ModelSpec, recipe: InputRecipe, golden: Golden) -> Path:
        """Atomically (re)write the golden and its sidecar; returns the ``.npz`` path."""
        with self.locked(spec, recipe):
            return self.write_unlocked(spec, recipe, golden)

    def load_unlocked(self, spec: ModelSpec, recipe: InputRecipe) -> Golden:
        path = self.path_for(spec, recipe)
        side = self.sidecar(path)
        if not path.is_file() or not side.is_file():
            raise GoldenMissing(
                where=path,
                problem="no golden for this model and input recipe",
                fix=f"run `{rerun_command(spec, recipe)}` once to write it, then review and commit it",
            )
        meta = self._read_sidecar(side)
        fix_regen = rerun_command(spec, recipe, "--update-goldens")
        if meta.get("model_sha256") != spec.sha256:
            raise GoldenStale(
                where=path,
                problem=f"golden was made from model {meta.get('model')!r} sha256 "
                f"{str(meta.get('model_sha256'))[:12]}…, but {spec.path.name} is now "
                f"{spec.sha256[:12]}…; it is never reused for a different model",
                fix=f"if the model change is intended, rewrite it: {fix_regen}",
            )
        mismatch = GoldenCorrupt(
            where=path,
            problem="the .npz and its .json sidecar do not belong together (input recipe or npz hash differs)",
            fix=f"rewrite it: {fix_regen}",
        )
        if meta.get("inputs", {}).get("id") != recipe.id:
            raise mismatch
        feeds, outputs = self._read_npz(path, meta, fix_regen, mismatch=mismatch)
        return Golden(feeds=feeds, outputs=outputs, meta=meta)

    def write_unlocked(self, spec: ModelSpec, recipe: InputRecipe, golden: Golden) -> Path:
        return self.save_unlocked(spec, recipe, golden)[0]

    def save_unlocked(self, spec: ModelSpec, recipe: InputRecipe, golden: Golden) -> tuple[Path, Golden]:
        """Write the golden; returns its ``.npz`` path and the golden with the sidecar's full ``meta`` (so the
        caller need not read back what it just wrote). The ``.npz`` is hashed from the bytes written."""
        if "producer" not in golden.meta:
            raise ValueError("Golden.meta must name its producer runner")
        if len(golden.feeds) != len(golden.outputs) or not golden.feeds:
            raise ValueError("a golden needs one output dict per feed, and at least one feed")
        path = self.path_for(spec, recipe)
        arrays: dict[str, np.ndarray] = {}
        bf16_keys = []
        for kind, per_iter in (("input", golden.feeds), ("output", golden.outputs)):
            for index, tensors in enumerate(per_iter):
                for name, arr in tensors.items():
                    key = f"{kind}/{index}/{name}"
                    value = np.asarray(arr)
                    if value.dtype == BFLOAT16:
                        bf16_keys.append(key)
                        value = value.view(np.uint16)
                    arrays[key] = value
        warning = large_golden_warning(path, arrays, spec=spec, recipe=recipe)
        if warning:
            LOG.warning(warning)
        buffer = io.BytesIO()
        save_npz_stable(buffer, arrays)
        data = buffer.getvalue()
        _check_round_trip(spec, data, arrays)  # before anything is written: --update-goldens too
        meta = {
            **golden.meta,
            "schema_version": SCHEMA_VERSION,
            "model": spec.name,
            "model_file": spec.path.name,
            "model_sha256": spec.sha256,
            "inputs": {**golden.meta.get("inputs", {}), "id": recipe.id},
            "iterations": len(golden.feeds),
            "bf16_keys": sorted(bf16_keys),
            "versions": _versions(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "npz_sha256": hashlib.sha256(data).hexdigest(),
        }
        text = json.dumps(meta, indent=2, sort_keys=True) + "\n"
        atomic_write_all({path: data, self.sidecar(path): text.encode()}, durable=True)  # both or neither
        return path, Golden(feeds=golden.feeds, outputs=golden.outputs, meta=json.loads(text))

    def refresh_usage_unlocked(self, spec: ModelSpec, recipe: InputRecipe, stored: Golden, used_by: Any) -> Golden:
        """``stored`` with its sidecar's ``used_by`` set to ``used_by`` (the sidecar alone rewritten, only when it
        changed; the ``.npz`` is untouched). ``None`` keeps what is there."""
        if used_by is None or stored.meta.get("used_by") == used_by:
            return stored
        meta = {**stored.meta, "used_by": used_by}
        text = json.dumps(meta, indent=2, sort_keys=True) + "\n"
        atomic_write(self.sidecar(self.path_for(spec, recipe)), text.encode(), durable=True)
        return Golden(feeds=stored.feeds, outputs=stored.outputs, meta=meta)

    @staticmethod
    def _read_sidecar(side: Path) -> dict[str, Any]:
        """The sidecar, every field the reader uses checked for its type (:mod:`harness.core.jsonfile`)."""
        fix = "restore it from version control or rewrite the golden with --update-goldens"
        doc = JsonObject.read(side, what="golden sidecar", fix=fix, error=GoldenCorrupt)
        found = doc.data.get("schema_version")
        if found != SCHEMA_VERSION or isinstance(found, bool):
            raise GoldenCorrupt(
                where=side,
                problem=f"unknown sidecar schema_version {found!r} (this castguard reads {SCHEMA_VERSION})",
                fix="rewrite the golden with --update-goldens",
            )
        for name in ("model_sha256", "npz_sha256"):
            doc.get(name, str)
        doc.object("inputs").get("id", str)
        doc.get("iterations", int)
        doc.items("bf16_keys", str, default=[])
        doc.object("versions", optional=True)
        return dict(doc.data)

    @staticmethod
    def _read_npz(
        path: Path, meta: dict[str, Any], fix_regen: str, *, mismatch: GoldenCorrupt
    ) -> tuple[list[Feed], list[dict[str, np.ndarray]]]:
        """The feeds and outputs, read and hashed in one pass (:func:`harness.core.npzfile.read_npz`); ``mismatch``
        when the file's sha256 is not the sidecar's (also when it cannot be read: the hash tells a changed file)."""
        try:
            # large outputs mapped, not copied; not on Windows, where a mapped file cannot be replaced (--update-goldens)
            stored, digest = read_npz(path, with_sha256=True, mapped=os.name == "posix")
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
            if meta.get("npz_sha256") != sha256_file(path):
                raise mismatch from err
            raise GoldenCorrupt(
                where=path,
                problem=f"cannot read the .npz: {err}",
                fix=f"restore it from version control or rewrite it: {fix_regen}",
            ) from err
        if meta.get("npz_sha256") != digest:
            raise mismatch
        n = meta.get("iterations")
        bf16 = set(meta.get("bf16_keys", []))
        feeds: list[Feed] = [{} for _ in range(n if isinstance(n, int) and n > 0 else 0)]
        outputs: list[dict[str, np.ndarray]] = [{} for _ in feeds]
        for key, value in stored.items():
            match = _KEY_RE.match(key)
            if not match or int(match[2]) >= len(feeds):
                raise GoldenCorrupt(
                    where=path, problem=f"unexpected array {key!r} for {n} iteration(s)", fix=f"rewrite it: {fix_regen}"
                )
            arr = bits_to_bf16(value) if key in bf16 else value
            (feeds if match[1] == "input" else outputs)[int(match[2])][match[3]] = arr
        if not feeds or any(not f for f in feeds) or any(not o for o in outputs):
            raise GoldenCorrupt(
                where=path, problem="some iterations have no inputs or no outputs", fix=f"rewrite it: {fix_regen}"
            )
        return feeds, outputs


def _check_round_trip(spec: ModelSpec, data: bytes, arrays: Mapping[str, np.ndarray]) -> None:
    """Every input/output name must come back from the ``.npz`` as it went in (a NUL ends a zip member's name, a
    newline is not read back); one that would not is refused, naming it, before a golden that could never be read
    is written."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        stored = set(archive.namelist())
    bad = sorted(
        key for key in arrays if key + ".npy" not in stored or (m := _KEY_RE.match(key)) is None or m.group(0) != key
    )
    if bad:
        names = ", ".join(repr(key.split("/", 2)[2]) for key in bad)
        raise ModelError(
            where=spec.path,
            problem=f"tensor name(s) {names} cannot be stored in a golden and read back (a NUL or a line break, "
            "or a path separator this system rewrites); no golden was written",
            fix="rename the model's inputs/outputs to printable names (onnx.utils / onnx.compose, or the "
            "exporter's input_names/output_names) and run again",
        )


def _same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    if a.keys() != b.keys():
        return False
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    return True


def same_golden(stored: Golden, produced: Golden) -> bool:
    """Every feed and output of ``produced`` equals ``stored``'s bit for bit (NaN included), iteration by iteration."""
    pairs = (*zip(stored.feeds, produced.feeds), *zip(stored.outputs, produced.outputs))
    return (
        len(stored.feeds) == len(produced.feeds)
        and len(stored.outputs) == len(produced.outputs)
        and all(_same_arrays(a, b) for a, b in pairs)
    )


def ensure_golden(
    store: GoldenStore, spec: ModelSpec, recipe: InputRecipe, *, update: bool, produce: Callable[[], Golden]
) -> tuple[Golden, Path | None]:
    """Load the golden, or produce and write it when missing (or when ``update``).

    Returns ``(golden, written_path)``; ``written_path`` is set when this call wrote the golden (``golden`` then
    carries the sidecar's meta as written), in which case the caller must fail once so that a human reviews it.
    With ``update``, a produced golden equal to the stored one value for value (same model) is not rewritten and
    fails nothing. Stale or corrupt goldens raise unless ``update`` is set. Check-produce-write happens under the
    golden's lock (xdist-safe).
    """
    with store.locked(spec, recipe):
        stored = None
        try:
            stored = store.load_unlocked(spec, recipe)
        except GoldenMissing:
            pass
        except (GoldenStale, GoldenCorrupt):
            if not update:
                raise
        if stored is not None and not update:
            return stored, None
        produced = produce()
        if stored is not None and same_golden(stored, produced):
            return store.refresh_usage_unlocked(spec, recipe, stored, produced.meta.get("used_by")), None
        path, written = store.save_unlocked(spec, recipe, produced)
        return written, path
