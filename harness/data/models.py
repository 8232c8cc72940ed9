"""Resolve ``--model [KEY=]NAME|PATH`` to a :class:`ModelSpec` (loading is :func:`harness.data.onnxfile.load_model`).

Resolution order: a path that exists is used as is. ``KEY=PATH`` names the model. A bare name is looked up in
the bundled models folder (``test_models/``): ``NAME``, ``*/NAME``, then the same with ``.onnx`` appended.
Anything else is a :class:`~harness.core.errors.ModelError` with a did-you-mean list of the bundled models.

Each model gets a stable key (:attr:`ModelSpec.name`: goldens go to ``goldens/<key>/``, test ids use it), so two
files both called ``model.onnx`` never share goldens: the user's ``KEY``; a bundled model's name; for a file
inside the project, its path relative to the project without ``.onnx``, folders joined by ``.``
(``models/bert/model.onnx`` -> ``models.bert.model``, the same on every checkout); for a file outside the
project, its stem and a hash of its absolute path (``model-3f2a9c1d``; name it with ``KEY=PATH`` to make the
key portable).

Loading and hashing are :mod:`harness.data.onnxfile`'s: external data is allowed only inside the model's own
folder (a location that is absolute or leaves it, ``../secret.bin``, is refused before any file is opened), and
the sha256 covers the data files, streamed.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import onnx

from harness.core.background import answer_later
from harness.core.errors import ModelError
from harness.core.files import sha256_files
from harness.data.onnxfile import LAZY_ABOVE, model_files, model_sha256, parse_model, read_weights

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
__all__ = [
    "LocatedModel",
    "ModelSpec",
    "bundled_model_names",
    "bundled_models_dir",
    "locate_model",
    "model_key",
    "model_sha256",
    "resolve_model",
]


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: stable key (see the module docstring), absolute path, content hash, and the ``--model``
    value that selects it again with the same key from the folder it was given in (``rerun``)."""

    name: str
    path: Path
    sha256: str
    rerun: str = ""

    @property
    def rerun_ref(self) -> str:
        return self.rerun or f"{self.name}={self.path}"


BUNDLED = "harness.bundled_models"


def bundled_registry() -> ModuleType:
    """The registry of castguard's bundled models: ``harness.bundled_models``, which an installed castguard maps to
    its ``test_models/`` folder. A source checkout used from PYTHONPATH without being installed has no such mapping:
    there the same folder, ``test_models/`` beside ``harness/``, is loaded under that name (as the wheel installs
    it), so ``harness.bundled_models.*`` imports resolve in both layouts."""
    try:
        return importlib.import_module(BUNDLED)
    except ModuleNotFoundError as err:
        if err.name != BUNDLED:
            raise
    folder = Path(__file__).resolve().parents[2] / "test_models"
    spec = importlib.util.spec_from_file_location(
        BUNDLED, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None or not folder.is_dir():
        raise ModelError(
            where=folder,
            problem="castguard's bundled models are missing (neither harness.bundled_models "
            "is installed nor test_models/ is beside harness/)",
            fix="reinstall castguard: pip install castguard (or pip install -e . in its repository)",
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[BUNDLED] = module
    spec.loader.exec_module(module)
    return module


def bundled_models_dir() -> Path:
    """The folder of the bundled models shipped with castguard (:func:`bundled_registry`)."""
    return Path(str(bundled_registry().__file__)).parent


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


def model_key(path: Path, *, project_dir: Path | None) -> str:
    """The key of a model file given by path (see the module docstring); ``project_dir=None``: the file stem."""
    if project_dir is None:
        return path.stem
    path, project = path.resolve(), project_dir.resolve()
    if path.is_relative_to(project):
        return ".".join(path.relative_to(project).with_suffix("").parts)
    return f"{path.stem}-{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class LocatedModel:
    """A ``--model`` value found on disk: its key, file and rerun value, before the file is hashed."""

    name: str
    path: Path
    rerun: str = ""

    def spec(self) -> ModelSpec:
        """The :class:`ModelSpec` (hashes the file, external data included)."""
        return ModelSpec(name=self.name, path=self.path, sha256=model_sha256(self.path), rerun=self.rerun)

    def load(self, *, lazy_above: int = LAZY_ABOVE) -> tuple[ModelSpec, onnx.ModelProto]:
        """The :class:`ModelSpec` and the model, its weights above ``lazy_above`` bytes left on disk: the file parsed once,
        and hashed on a thread while its weights are read and checked (a 440 MB decoder was parsed twice, once to
        hash it: 0.5 s more at every start)."""
        parsed = parse_model(self.path)
        files = model_files(self.path, parsed=parsed)  # read here: read_weights rewrites the tensors it loads
        digest = answer_later(lambda: sha256_files(files), name="sha256")
        model = read_weights(parsed, weights="lazy", lazy_above=lazy_above)
        return ModelSpec(name=self.name, path=self.path, sha256=digest.result(), rerun=self.rerun), model


def resolve_model(ref: str, *, search_dir: Path, project_dir: Path | None = None) -> ModelSpec:
    """``--model`` value -> :class:`ModelSpec`; :class:`ModelError` (with did-you-mean) when not found.

    ``project_dir`` decides the keys of files given by path (None: their stem, as before keys existed)."""
    return locate_model(ref, search_dir=search_dir, project_dir=project_dir).spec()


def locate_model(ref: str, *, search_dir: Path, project_dir: Path | None = None) -> LocatedModel:
    """:func:`resolve_model` without hashing the file: what ``--shard`` needs to know every model's key."""
    path = Path(ref).expanduser()
    if path.is_file():
        path = path.resolve()
        return LocatedModel(name=model_key(path, project_dir=project_dir), path=path, rerun=ref)
    key, sep, target = ref.partition("=")
    if sep and _KEY.match(key):
        named = Path(target).expanduser()
        if not named.is_file():
            raise ModelError(
                where=f"--model {ref}",
                problem=f"{target!r} is not an existing .onnx file",
                fix="write --model KEY=PATH with the path of an .onnx file",
            )
        return LocatedModel(name=key, path=named.resolve())
    if sep:
        raise ModelError(
            where=f"--model {ref}",
            problem=f"{key!r} is not a usable model key",
            fix="start the key with a letter or digit and use only letters, digits, '_', '.', '-'",
        )
    if path.is_dir():
        raise ModelError(
            where=ref,
            problem="is a directory, not an .onnx file",
            fix="pass the .onnx file inside it, e.g. --model DIR/model.onnx",
        )
    is_bare_name = len(path.parts) == 1
    if is_bare_name:
        found = _bundled_candidates(ref, search_dir)
        if found:
            return LocatedModel(name=found[0].stem, path=found[0].resolve(), rerun=found[0].stem)
    bundled = bundled_model_names(search_dir)
    close = difflib.get_close_matches(Path(ref).stem, bundled, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    problem = "no such file" if not is_bare_name else "not an existing file and not a bundled model name"
    raise ModelError(
        where=ref,
        problem=problem,
        fix=f"{hint}pass a path to an .onnx file or one of the bundled models: "
        f"{', '.join(bundled) or '(none found in ' + str(search_dir) + ')'}",
    )
