"""The one place that loads and hashes ONNX files, external data included, in bounded memory (:mod:`harness.data.onnxsave`
writes them).

* :func:`load_model` (the only one) parses the graph with ``load_external_data=False``, refuses external-data
  locations that leave the model's folder, missing data files and data files shorter than an offset + length
  (one :class:`~harness.core.errors.ModelError` naming the file and the fix), then loads the weights
  (``weights="all"``) or only the small ones (``weights="lazy"``): big tensors stay external, read later one at
  a time; last, onnx's checker (``check=False`` only for castguard's own files read back).
* A lazy model is only meaningful with its *base folder* (the folder its locations are relative to). A tensor
  may also carry a *pending cast* (:func:`harness.data.pending.set_pending_cast`): its declared type is the new one, its bytes still
  the source's; :func:`harness.data.onnxsave.save_model` converts it while streaming.
* :func:`model_sha256` streams the ``.onnx`` and its data files (sorted by location) through sha256.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, external_data_helper

from harness.core.dtypes import np_dtype
from harness.core.errors import ModelError, ModelNotFound
from harness.core.files import sha256_files
from harness.data.onnxcheck import check_graph
from harness.data.pending import apply_pending, drop_pending, pending_cast, source_view

EXTERNAL_DATA_ABOVE = 1_800_000_000
"""Bytes of in-memory weights above which a model needs external data (protobuf's limit is 2 GiB)."""
LAZY_ABOVE = 1 << 16
"""``weights="lazy"`` loads external tensors up to this many bytes; bigger ones stay on disk."""
CHUNK_BYTES = 1 << 24
_FIX_VALID = "pass a valid .onnx file (check it with onnx.checker.check_model)"


def external_tensors(model: onnx.ModelProto) -> list[TensorProto]:
    """Every tensor (initializers and attributes, subgraphs included) whose bytes live in a data file."""
    return [t for t in external_data_helper._get_all_tensors(model) if external_data_helper.uses_external_data(t)]


def _info(tensor: TensorProto, *, where: Path) -> external_data_helper.ExternalDataInfo:
    try:
        return external_data_helper.ExternalDataInfo(tensor)
    except ValueError as err:
        raise ModelError(
            where=where,
            problem=f"tensor {tensor.name!r} has bad external data fields ({err})",
            fix="re-save the model with onnx.save_model(..., save_as_external_data=True)",
        ) from None


def tensor_nbytes(tensor: TensorProto) -> int:
    """Bytes of the tensor's values in its declared type (what a data file holds for it)."""
    return int(np.prod(tensor.dims, dtype=np.int64)) * np_dtype(tensor.data_type).itemsize


def check_external_data(model: onnx.ModelProto, folder: Path, *, where: Path) -> list[Path]:
    """The data files `model` uses, sorted by location; ModelError for a location leaving `folder`, a missing
    file, or a file too short for a tensor's offset + length."""
    return _data_files(external_tensors(model), folder, where=where)


def _data_files(external: Sequence[TensorProto], folder: Path, *, where: Path) -> list[Path]:
    """:func:`check_external_data` of the model whose external tensors are `external`."""
    root = folder.resolve()
    files: dict[str, Path] = {}
    for tensor in external:
        info = _info(tensor, where=where)
        target = (root / info.location).resolve()
        if not info.location or Path(info.location).is_absolute() or not target.is_relative_to(root):
            raise ModelError(
                where=where,
                problem=f"tensor {tensor.name!r} points to external data {info.location!r}, "
                f"outside the model's folder {root}",
                fix="keep external data files next to the model and name them by relative path "
                "(onnx.save_model(..., save_as_external_data=True))",
            )
        if not target.is_file():
            raise ModelError(
                where=where,
                problem=f"external data file {info.location!r} of tensor {tensor.name!r} is missing",
                fix=f"copy {info.location} next to the model",
            )
        offset = int(info.offset or 0)
        length = int(info.length) if info.length is not None else tensor_nbytes(source_view(tensor))
        size = target.stat().st_size
        if offset + length > size:
            raise ModelError(
                where=where,
                problem=f"external data file {info.location!r} is truncated: tensor "
                f"{tensor.name!r} needs bytes {offset}..{offset + length}, the file "
                f"has {size}",
                fix=f"copy {info.location} again (completely) from where the model was exported",
            )
        files[info.location] = target
    return [files[k] for k in sorted(files)]


def load_model(
    path: Path,
    *,
    weights: Literal["all", "lazy"] = "all",
    lazy_above: int = LAZY_ABOVE,
    data_dir: Path | None = None,
    check: bool = True,
) -> onnx.ModelProto:
    """The one loader of ONNX files (``pytest --model``, ``castguard convert``, tune, replay and the caches).

    Parses `path`, confines and checks its external data, and, with ``check`` (every model a user gives), runs
    onnx's checker; :class:`ModelError` for anything unusable. ``check=False`` is for castguard's own files
    read back (cache entries, the model it just saved, hashing). ``weights="lazy"`` leaves tensors above
    `lazy_above` bytes on disk (the model is then only meaningful with its folder). Locations are relative to
    `data_dir` (default: ``path.parent``) and may not leave it. In two steps: :func:`parse_model`, then
    :func:`read_weights` (a cache entry hashes what the first step parsed before any weight is read)."""
    parsed = parse_model(path, data_dir=data_dir)
    return read_weights(parsed, weights=weights, lazy_above=lazy_above, check=check)


@dataclass(frozen=True)
class ParsedModel:
    """A model file as :func:`parse_model` read it: its graph with no external weight read yet, the folder its data
    locations are relative to, and the tensors whose bytes live in data files, listed once (one walk of the graph
    for the hash, the weights and whether the model stays lazy)."""

    model: onnx.ModelProto
    path: Path
    data_dir: Path
    external: tuple[TensorProto, ...]

    @property
    def lazy(self) -> bool:
        """Whether a tensor's bytes are still in a data file (after :func:`read_weights`: the big ones)."""
        return any(external_data_helper.uses_external_data(t) for t in self.external)


def parse_model(path: Path, *, data_dir: Path | None = None) -> ParsedModel:
    """The graph of `path` with its external data confined and checked (see :func:`load_model`), no external
    weight read yet: what :func:`model_sha256` and :func:`read_weights` take."""
    path = Path(path)
    if not path.is_file():
        raise ModelNotFound(
            where=path, problem="model file does not exist", fix="pass the path of an existing .onnx file"
        )
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, OSError) as err:
        raise ModelError(
            where=path, fix=_FIX_VALID, problem=f"not an ONNX model (truncated or garbage? {type(err).__name__}: {err})"
        ) from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.opset_import:
        raise ModelError(where=path, problem="not an ONNX model (no IR version, graph or opset)", fix=_FIX_VALID)
    folder = path.parent if data_dir is None else Path(data_dir)
    tensors = list(external_data_helper._get_all_tensors(model))  # the one walk of the graph
    external = tuple(t for t in tensors if external_data_helper.uses_external_data(t))
    _data_files(external, folder, where=path)
    for tensor in tensors:
        drop_pending(tensor)  # castguard's own mark is never trusted from a file
    return ParsedModel(model=model, path=path, data_dir=folder, external=external)


def read_weights(
    parsed: ParsedModel, *, weights: Literal["all", "lazy"] = "all", lazy_above: int = LAZY_ABOVE, check: bool = True
) -> onnx.ModelProto:
    """The second step of :func:`load_model`: the parsed model with its external weights read (all, or those up to
    `lazy_above` bytes) from its folder, and checked."""
    model, path = parsed.model, parsed.path
    for tensor in parsed.external:
        if weights == "all" or tensor_nbytes(tensor) <= lazy_above:
            try:
                external_data_helper.load_external_data_for_tensor(tensor, str(parsed.data_dir))
            except (onnx.checker.ValidationError, ValueError, OSError) as err:
                raise ModelError(
                    where=path,
                    problem=f"cannot read external data of tensor {tensor.name!r}: {err}",
                    fix="keep each data file a plain file (one link, not a symlink) next to the model",
                ) from None
    if check:
        check_graph(model, path)
    return model


def is_lazy(model: onnx.ModelProto) -> bool:
    return bool(external_tensors(model))


def has_pending_casts(model: onnx.ModelProto) -> bool:
    return any(pending_cast(t) is not None for t in external_tensors(model))


def iter_chunks(tensor: TensorProto, base_dir: Path, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """The source values of an external tensor, flat, a bounded chunk at a time (no pending cast applied)."""
    source = source_view(tensor)
    dtype = np_dtype(source.data_type)
    info = _info(tensor, where=base_dir)
    left = tensor_nbytes(source)
    step = max(chunk_bytes // dtype.itemsize, 1) * dtype.itemsize
    with open(base_dir / info.location, "rb") as handle:
        handle.seek(int(info.offset or 0))
        while left > 0:
            data = handle.read(min(step, left))
            if not data:
                raise ModelError(
                    where=base_dir / info.location,
                    problem=f"ends inside tensor {tensor.name!r}",
                    fix="copy the data file again (completely)",
                )
            left -= len(data)
            yield np.frombuffer(data, dtype=dtype)


def tensor_array(tensor: TensorProto, base_dir: Path | None) -> np.ndarray:
    """The whole tensor as numpy (pending cast applied): for small tensors, or when memory is no concern."""
    if not external_data_helper.uses_external_data(tensor):
        return onnx.numpy_helper.to_array(tensor)
    if base_dir is None:
        raise ValueError(f"tensor {tensor.name!r} is external: its base folder is needed")
    flat = np.concatenate(list(iter_chunks(tensor, base_dir))) if tensor_nbytes(tensor) else np.empty(0)
    return apply_pending(flat, tensor).reshape(tuple(tensor.dims))


def model_sha256(path: Path, *, parsed: ParsedModel | None = None) -> str:
    """sha256 over the ``.onnx`` bytes followed by each external data file (sorted by location), streamed;
    `parsed`: the file as :func:`parse_model` read it (relative to its own folder; not parsed again)."""
    return sha256_files(model_files(path, parsed=parsed))


def model_files(path: Path, *, parsed: ParsedModel | None = None) -> list[Path]:
    """The files :func:`model_sha256` hashes, in its order: the ``.onnx`` file, then each external data file."""
    path = Path(path)
    if parsed is None:
        parsed = parse_model(path)
    return [path, *_data_files(parsed.external, path.parent, where=path)]


def weights_size(model: onnx.ModelProto) -> int:
    """Bytes of in-memory initializer data: the bulk of a model, far cheaper than ``ByteSize()``."""
    return sum(
        len(t.raw_data) + 4 * (len(t.float_data) + len(t.int32_data)) + 8 * (len(t.int64_data) + len(t.double_data))
        for t in external_data_helper._get_initializer_tensors(model)
    )
