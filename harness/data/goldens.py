"""FP32 goldens: ``<root>/<model>/<inputs-id>.npz`` (feeds and outputs) plus a ``.json`` sidecar.

The ``.npz`` holds ``input/<i>/<name>`` and ``output/<i>/<name>`` for every iteration, written
deterministically (fixed zip timestamps, no pickle) so identical goldens are identical bytes. bf16 arrays are
stored as their uint16 bits and listed in the sidecar. The sidecar records the schema version, the model's
sha256, library versions, the input recipe, the producer runner and the ``.npz`` sha256.

Writes are atomic (temp file in the same folder + ``os.replace``). :meth:`GoldenStore.locked` is an exclusive
:mod:`harness.core.locks` lock on ``<golden>.lock`` (freed by the system when its holder dies, deleted when released)
so that pytest-xdist workers do not race: the plugin checks, produces and
writes under it, and :meth:`GoldenStore.load` reads under it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import logging
import re
import shlex
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.dtypes import BFLOAT16, bits_to_bf16
from harness.core.errors import GoldenCorrupt, GoldenMissing, GoldenStale
from harness.core.files import atomic_write, sha256_file
from harness.core.locks import held
from harness.data.models import ModelSpec
from harness.data.recipes import Feed, InputRecipe

SCHEMA_VERSION = 1
LOG = logging.getLogger("harness.data")
LARGE_GOLDEN_BYTES = 100_000_000
"""A golden above this warns before it is written (8x512x32000 fp32 logits alone are 0.5 GB)."""
_KEY_RE = re.compile(r"^(input|output)/(\d+)/(.+)$")
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Golden:
    """Exact feeds and FP32 outputs per iteration; ``meta`` is the sidecar (``producer`` is required to write)."""

    feeds: list[Feed]
    outputs: list[dict[str, np.ndarray]]
    meta: dict[str, Any] = field(default_factory=dict)


def rerun_command(spec: ModelSpec, recipe: InputRecipe, *flags: str, input_options: bool = True) -> str:
    """The ``pytest`` command that selects this model with this input recipe again, from the same folder: the
    model by a ``--model`` value that keeps its key, and the recipe's seed, iterations, ranges, shapes or file
    (``input_options=False``: a bundled model's own inputs, which ``--model NAME`` brings along)."""
    words = ["pytest", "--model", spec.rerun_ref]
    if recipe.inputs_file is not None:
        words += ["--inputs", str(recipe.inputs_file)] if input_options else []
    else:
        for name, lo, hi in recipe.val_ranges if input_options else ():
            words += ["--val-range", f"{name}:[{lo:g},{hi:g}]" if name else f"[{lo:g},{hi:g}]"]
        if recipe.input_shapes:
            words += ["--input-shapes", ",".join(f"{n}:{'x'.join(map(str, s))}" for n, s in recipe.input_shapes)]
        words += ["--seed", str(recipe.seed)] if recipe.seed else []
        words += ["--iterations", str(recipe.iterations)] if recipe.iterations != 1 else []
    return shlex.join([*words, *flags])


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


def _npz_bytes_to(handle: Any, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(arrays[key]), allow_pickle=False)


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
        """Exclusive lock for one golden (``<golden>.lock``), shared by processes and xdist workers."""
        lock = self.path_for(spec, recipe).with_suffix(".lock")
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
        if meta.get("inputs", {}).get("id") != recipe.id or meta.get("npz_sha256") != sha256_file(path):
            raise GoldenCorrupt(
                where=path,
                problem="the .npz and its .json sidecar do not belong together (input recipe or npz hash differs)",
                fix=f"rewrite it: {fix_regen}",
            )
        feeds, outputs = self._read_npz(path, meta, fix_regen)
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
        _npz_bytes_to(buffer, arrays)
        data = buffer.getvalue()
        atomic_write(path, data, durable=True)
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
        atomic_write(self.sidecar(path), text.encode(), durable=True)
        return path, Golden(feeds=golden.feeds, outputs=golden.outputs, meta=json.loads(text))

    @staticmethod
    def _read_sidecar(side: Path) -> dict[str, Any]:
        try:
            meta = json.loads(side.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise GoldenCorrupt(
                where=side,
                problem=f"sidecar is not valid JSON: {err}",
                fix="restore it from version control or rewrite with --update-goldens",
            ) from err
        if not isinstance(meta, dict) or meta.get("schema_version") != SCHEMA_VERSION:
            found = meta.get("schema_version") if isinstance(meta, dict) else None
            raise GoldenCorrupt(
                where=side,
                problem=f"unknown sidecar schema_version {found!r} (this castguard reads {SCHEMA_VERSION})",
                fix="rewrite the golden with --update-goldens",
            )
        return meta

    @staticmethod
    def _read_npz(path: Path, meta: dict[str, Any], fix_regen: str) -> tuple[list[Feed], list[dict[str, np.ndarray]]]:
        n = meta.get("iterations")
        bf16 = set(meta.get("bf16_keys", []))
        feeds: list[Feed] = [{} for _ in range(n if isinstance(n, int) and n > 0 else 0)]
        outputs: list[dict[str, np.ndarray]] = [{} for _ in feeds]
        try:
            with np.load(path, allow_pickle=False) as data:
                for key in data.files:
                    match = _KEY_RE.match(key)
                    if not match or int(match[2]) >= len(feeds):
                        raise GoldenCorrupt(
                            where=path,
                            problem=f"unexpected array {key!r} for {n} iteration(s)",
                            fix=f"rewrite it: {fix_regen}",
                        )
                    arr = bits_to_bf16(data[key]) if key in bf16 else data[key]
                    (feeds if match[1] == "input" else outputs)[int(match[2])][match[3]] = arr
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
            raise GoldenCorrupt(
                where=path,
                problem=f"cannot read the .npz: {err}",
                fix=f"restore it from version control or rewrite it: {fix_regen}",
            ) from err
        if not feeds or any(not f for f in feeds) or any(not o for o in outputs):
            raise GoldenCorrupt(
                where=path, problem="some iterations have no inputs or no outputs", fix=f"rewrite it: {fix_regen}"
            )
        return feeds, outputs


def large_golden_warning(
    path: Path, arrays: Mapping[str, np.ndarray], *, spec: ModelSpec, recipe: InputRecipe
) -> str | None:
    """What to say before writing a golden above :data:`LARGE_GOLDEN_BYTES`: its size, its largest arrays, and the
    options that store less (smaller shapes, one iteration), as a command; None below the limit."""
    total = sum(int(a.nbytes) for a in arrays.values())
    if total <= LARGE_GOLDEN_BYTES:
        return None
    largest = sorted(arrays.items(), key=lambda item: -item[1].nbytes)[:3]
    shown = ", ".join(f"{key} {'x'.join(map(str, a.shape))} {a.dtype} ({a.nbytes / 1e6:.0f} MB)" for key, a in largest)
    halved = tuple(
        (name, tuple(max(1, d // 2) if i < 2 else d for i, d in enumerate(dims))) for name, dims in recipe.input_shapes
    )
    smaller = rerun_command(spec, replace(recipe, input_shapes=halved, iterations=1)) if halved else ""
    return (
        f"{path.name}: this golden is {total / 1e6:.0f} MB ({shown}); it is written to disk and read back by every "
        "run. A smaller golden: smaller --input-shapes (fewer tokens or a smaller batch; the golden grows with "
        f"both) and --iterations 1" + (f", e.g. {smaller}" if smaller else "")
    )


def ensure_golden(
    store: GoldenStore, spec: ModelSpec, recipe: InputRecipe, *, update: bool, produce: Callable[[], Golden]
) -> tuple[Golden, Path | None]:
    """Load the golden, or produce and write it when missing (or when ``update``).

    Returns ``(golden, written_path)``; ``written_path`` is set when this call wrote the golden (``golden`` then
    carries the sidecar's meta as written), in which
    case the caller must fail once so that a human reviews it. Stale or corrupt goldens raise unless
    ``update`` is set. Check-produce-write happens under the golden's lock (xdist-safe).
    """
    with store.locked(spec, recipe):
        if not update:
            try:
                return store.load_unlocked(spec, recipe), None
            except GoldenMissing:
                pass
        path, written = store.save_unlocked(spec, recipe, produce())
        return written, path


@dataclass(frozen=True)
class NonFinite:
    """The NaN/inf values of one golden output, over every iteration (``iteration``: the first that has them)."""

    output: str
    nan: int
    posinf: int
    neginf: int
    total: int
    iteration: int

    @property
    def count(self) -> int:
        return self.nan + self.posinf + self.neginf

    def describe(self) -> str:
        kinds = ", ".join(
            f"{n} {kind}" for n, kind in ((self.nan, "NaN"), (self.posinf, "+inf"), (self.neginf, "-inf")) if n
        )
        return f"output {self.output!r}: {self.count} of {self.total} values are not finite ({kinds})"


def non_finite(outputs: Sequence[Mapping[str, np.ndarray]]) -> tuple[NonFinite, ...]:
    """Every floating-point golden output holding NaN or inf (integer and bool outputs are always finite)."""
    found: dict[str, NonFinite] = {}
    for index, iteration in enumerate(outputs):
        for name, array in iteration.items():
            values = np.asarray(array)
            if values.dtype != BFLOAT16 and values.dtype.kind not in "fc":
                continue
            values = values.astype(np.float64) if values.dtype == BFLOAT16 else values
            nan, inf = int(np.isnan(values).sum()), np.isinf(values)
            pos, neg = int((inf & (values > 0)).sum()), int((inf & (values < 0)).sum())
            old = found.get(name, NonFinite(name, 0, 0, 0, 0, index))
            first = old.iteration if old.count or not nan + pos + neg else index
            found[name] = NonFinite(
                name, old.nan + nan, old.posinf + pos, old.neginf + neg, old.total + int(values.size), first
            )
    return tuple(f for f in found.values() if f.count)
