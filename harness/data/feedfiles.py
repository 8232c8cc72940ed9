"""Feed files, both ways: an ``.npz`` (one feed, maybe batched), a folder of ``.npz`` or a Polygraphy
``--save-inputs`` JSON read (:func:`load_feed_file`), and in-memory feeds written as a Polygraphy JSON named by its
content (:func:`write_feeds`, for ``castguard.check(inputs=...)``).

Nothing here unpickles: ``.npz`` files are opened with ``allow_pickle=False`` and Polygraphy's base64
``np.save`` payloads are decoded the same way.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.errors import InputDataError, UserError
from harness.core.files import atomic_write_text
from harness.core.jsonfile import read_json
from harness.core.npzfile import read_npz
from harness.data.feeds import Feed

Batch = Mapping[str, np.ndarray]


def load_feed_file(path: Path) -> list[Feed]:
    """Read an ``.npz`` (one feed, maybe batched), a folder of ``.npz`` (one feed per file, sorted by name) or a
    Polygraphy JSON (a list of feeds), never unpickling."""
    if path.is_dir():
        files = sorted(path.glob("*.npz"))
        if not files:
            raise InputDataError(
                where=path,
                problem="folder holds no .npz files",
                fix="put one .npz per batch in the folder, keys = model input names",
            )
        return [_load_npz(file) for file in files]
    if not path.is_file():
        raise InputDataError(where=path, problem="inputs file not found", fix="check the path")
    if path.suffix == ".npz":
        return [_load_npz(path)]
    if path.suffix == ".json":
        return _load_polygraphy_json(path)
    raise InputDataError(
        where=path,
        problem=f"unsupported inputs file type {path.suffix!r}",
        fix="use an .npz (np.savez), a folder of .npz or a Polygraphy --save-inputs .json",
    )


def _load_npz(path: Path) -> Feed:
    if not zipfile.is_zipfile(path):
        raise InputDataError(
            where=path,
            problem="not a readable .npz (not a zip archive)",
            fix="save inputs with np.savez(path, name=array, ...)",
        )
    try:
        stored, _ = read_npz(path)  # the one .npz reader: never unpickles
        return {key: np.ascontiguousarray(value) for key, value in stored.items()}
    except ValueError as err:
        if any(word in str(err) for word in ("allow_pickle", "Object arrays", "Python objects")):
            raise InputDataError(
                where=path,
                problem="holds pickled Python objects (object arrays); castguard never unpickles input files",
                fix="save plain numeric arrays, e.g. np.savez(path, x=x.astype(np.float32))",
            ) from err
        raise InputDataError(where=path, problem=f"not a readable .npz: {err}", fix="re-save it with np.savez") from err
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise InputDataError(where=path, problem=f"not a readable .npz: {err}", fix="re-save it with np.savez") from err


def _decode_array(obj: Any, *, path: Path, where: str) -> np.ndarray:
    if not isinstance(obj, Mapping) or "array" not in obj:
        raise InputDataError(
            where=path,
            problem=f"{where} is not a Polygraphy ndarray object "
            "({'array': <base64>, 'polygraphy_class': 'ndarray'})",
            fix="save inputs with `polygraphy run --save-inputs` or use an .npz",
        )
    try:
        raw = base64.b64decode(obj["array"], validate=True)
        arr: np.ndarray = np.load(io.BytesIO(raw), allow_pickle=False)
        return arr
    except (binascii.Error, ValueError, EOFError, TypeError) as err:
        raise InputDataError(
            where=path,
            problem=f"{where} cannot be decoded without unpickling: {err}",
            fix="save plain numeric arrays (polygraphy run --save-inputs)",
        ) from err


def _load_polygraphy_json(path: Path) -> list[Feed]:
    data = read_json(path, what="inputs file", fix="pass a Polygraphy --save-inputs file", error=InputDataError)
    if isinstance(data, Mapping):  # one feed saved on its own
        data = [data]
    if not isinstance(data, list) or not all(isinstance(it, Mapping) for it in data) or not data:
        raise InputDataError(
            where=path,
            problem="expected a non-empty JSON list of {input name: array} feeds",
            fix="pass a Polygraphy --save-inputs file",
        )
    return [
        {name: _decode_array(value, path=path, where=f"iteration {i} input {name!r}") for name, value in it.items()}
        for i, it in enumerate(data)
    ]


def write_feeds(feeds: Sequence[Batch], *, folder: Path) -> Path:
    """In-memory feeds as a Polygraphy inputs JSON named by its content (same feeds, same file, same golden)."""
    if not feeds:
        raise UserError(where="inputs=", problem="no feeds given", fix="pass one or more {input name: array} dicts")
    payload = []
    for index, feed in enumerate(feeds):
        if not isinstance(feed, Mapping) or not feed:
            raise UserError(
                where=f"inputs=[{index}]",
                problem=f"not a non-empty mapping: {type(feed).__name__}",
                fix="pass {input name: numpy array} per iteration",
            )
        entry = {}
        for name in sorted(feed):
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(np.asarray(feed[name])), allow_pickle=False)
            entry[str(name)] = {"array": base64.b64encode(buffer.getvalue()).decode(), "polygraphy_class": "ndarray"}
        payload.append(entry)
    text = json.dumps(payload, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()
    path = folder / f"inputs-{digest[:16]}.json"
    if not path.is_file():
        atomic_write_text(path, text)  # xdist workers may write the same file
    return path
