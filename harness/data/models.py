"""Resolve ``--model NAME|PATH`` to a :class:`ModelSpec` and load ONNX files safely.

Resolution order: a path that exists is used as is. A bare name is looked up in the bundled models folder
(``test_models/``): ``NAME``, ``*/NAME``, then the same with ``.onnx`` appended. Anything else is a
:class:`~harness.errors.ModelError` with a did-you-mean list of the bundled models.

External data is allowed only inside the model's own folder; a location that is absolute or leaves the
folder (``../secret.bin``) is refused before any file is opened.
"""
from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx.external_data_helper import ExternalDataInfo, uses_external_data

from harness.errors import ModelError

_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: stable name (file stem), absolute path and content hash."""

    name: str
    path: Path
    sha256: str


def bundled_models_dir() -> Path:
    """The folder of the ``test_models`` package shipped with castguard."""
    import test_models

    return Path(test_models.__file__).parent


def bundled_model_names(search_dir: Path) -> list[str]:
    """Names (file stems) of every ``.onnx`` directly in ``search_dir`` or one folder below it."""
    paths = list(search_dir.glob("*.onnx")) + list(search_dir.glob("*/*.onnx"))
    return sorted({p.stem for p in paths})


def _bundled_candidates(ref: str, search_dir: Path) -> list[Path]:
    names = [ref] if ref.endswith(".onnx") else [ref, ref + ".onnx"]
    found: list[Path] = []
    for name in names:
        found += [p for p in [search_dir / name] if p.is_file()]
        found += sorted(p for p in search_dir.glob(f"*/{name}") if p.is_file())
    return found


def resolve_model(ref: str, *, search_dir: Path) -> ModelSpec:
    """``--model`` value -> :class:`ModelSpec`; :class:`ModelError` (with did-you-mean) when not found."""
    path = Path(ref).expanduser()
    if path.is_file():
        return _spec_for(path.resolve())
    if path.is_dir():
        raise ModelError(where=ref, problem="is a directory, not an .onnx file",
                         fix="pass the .onnx file inside it, e.g. --model DIR/model.onnx")
    is_bare_name = len(path.parts) == 1
    if is_bare_name:
        found = _bundled_candidates(ref, search_dir)
        if found:
            return _spec_for(found[0].resolve())
    bundled = bundled_model_names(search_dir)
    close = difflib.get_close_matches(Path(ref).stem, bundled, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    problem = "no such file" if not is_bare_name else "not an existing file and not a bundled model name"
    raise ModelError(where=ref, problem=problem,
                     fix=f"{hint}pass a path to an .onnx file or one of the bundled models: "
                         f"{', '.join(bundled) or '(none found in ' + str(search_dir) + ')'}")


def _spec_for(path: Path) -> ModelSpec:
    return ModelSpec(name=path.stem, path=path, sha256=model_sha256(path))


def _read_proto(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise ModelError(where=path, problem="file does not exist", fix="check the path passed to --model")
    try:
        return onnx.load(str(path), load_external_data=False)
    except DecodeError as err:
        raise ModelError(where=path, problem=f"not a valid ONNX protobuf (truncated or garbage?): {err}",
                         fix="re-export or re-download the model; check the file is complete") from err


def external_data_files(model: onnx.ModelProto, *, model_path: Path) -> list[Path]:
    """The external data files a model references, each checked to stay inside the model's folder."""
    base = model_path.parent.resolve()
    files: dict[str, Path] = {}
    for tensor in onnx.external_data_helper._get_all_tensors(model):
        if not uses_external_data(tensor):
            continue
        location = ExternalDataInfo(tensor).location
        target = (base / location).resolve()
        if Path(location).is_absolute() or not target.is_relative_to(base):
            raise ModelError(where=model_path,
                             problem=f"tensor {tensor.name!r} points to external data {location!r}, "
                                     f"which is outside the model's folder {base}",
                             fix="keep external data files next to the .onnx file and reference them by "
                                 "relative name (onnx.save(..., save_as_external_data=True))")
        if not target.is_file():
            raise ModelError(where=model_path,
                             problem=f"external data file {location!r} of tensor {tensor.name!r} is missing",
                             fix=f"copy {location} next to the model")
        files[location] = target
    return [files[k] for k in sorted(files)]


def model_sha256(path: Path) -> str:
    """sha256 over the .onnx bytes followed by each external data file (sorted by location)."""
    proto = _read_proto(path)
    digest = hashlib.sha256()
    for file in [path, *external_data_files(proto, model_path=path)]:
        with file.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def load_model(path: Path) -> onnx.ModelProto:
    """Load and check a model, external data included; :class:`ModelError` for anything unusable."""
    proto = _read_proto(path)
    external_data_files(proto, model_path=path)
    onnx.load_external_data_for_model(proto, str(path.parent))
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(where=path, problem=f"not a valid ONNX model: {first}",
                         fix="re-export the model; `python -c \"import onnx; onnx.checker.check_model('"
                             f"{path.name}')\"` shows the details") from err
    return proto
