"""--model resolution (paths, bundled names, did-you-mean) and safe loading (garbage, truncation, external data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from harness.core.errors import ModelError
from harness.data.models import bundled_model_names, bundled_models_dir, model_sha256, resolve_model
from harness.data.onnxfile import is_lazy, load_model
from tests.helpers.graphs import mlp_model, save


@pytest.fixture
def zoo(tmp_path: Path) -> Path:
    save(mlp_model(), tmp_path / "zoo" / "mnist" / "mnist.onnx")
    save(mlp_model(1), tmp_path / "zoo" / "needs_constraints" / "needs_constraints.onnx")
    save(mlp_model(2), tmp_path / "zoo" / "top.onnx")
    return tmp_path / "zoo"


@pytest.mark.parametrize("ref", ["mnist", "mnist.onnx"])
def test_bare_names_resolve_in_the_bundled_folder(zoo: Path, ref: str) -> None:
    spec = resolve_model(ref, search_dir=zoo)
    assert spec.name == "mnist" and spec.path == (zoo / "mnist" / "mnist.onnx").resolve()
    assert resolve_model("top", search_dir=zoo).name == "top"


def test_existing_path_wins_and_name_is_the_stem(zoo: Path, tmp_path: Path) -> None:
    path = save(mlp_model(3), tmp_path / "work" / "my model.onnx")
    spec = resolve_model(str(path), search_dir=zoo)
    assert spec.name == "my model" and spec.sha256 == model_sha256(path) and len(spec.sha256) == 64


def test_wrong_name_gets_did_you_mean(zoo: Path) -> None:
    with pytest.raises(ModelError) as err:
        resolve_model("mnst", search_dir=zoo)
    text = str(err.value)
    assert text.startswith("mnst: ") and "did you mean 'mnist'" in text
    assert "mnist, needs_constraints, top" in text


def test_missing_path_says_no_such_file(zoo: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no such file"):
        resolve_model(str(tmp_path / "nope" / "model.onnx"), search_dir=zoo)


def test_real_bundled_models_are_found() -> None:
    names = bundled_model_names(bundled_models_dir())
    assert {"mnist", "needs_constraints"} <= set(names)
    assert resolve_model("mnist.onnx", search_dir=bundled_models_dir()).name == "mnist"


@pytest.mark.parametrize("content", [b"", b"hello, not onnx", None])
def test_garbage_and_truncated_models(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "bad.onnx"
    full = mlp_model().SerializeToString()
    path.write_bytes(full[: len(full) // 2] if content is None else content)
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert str(err.value).startswith(str(path)) and "fix:" in str(err.value)


def test_load_model_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        load_model(tmp_path / "missing.onnx")


def _external(tmp_path: Path, location: str) -> Path:
    model = mlp_model()
    folder = tmp_path / "m"
    folder.mkdir()
    onnx.save(
        model,
        str(folder / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    proto = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(proto, str(folder / "model.onnx"))
    return folder / "model.onnx"


def test_external_data_inside_the_folder_loads_and_is_hashed(tmp_path: Path) -> None:
    path = _external(tmp_path, "weights.bin")
    model = load_model(path)
    np.testing.assert_array_equal(
        numpy_helper.to_array(model.graph.initializer[0]), numpy_helper.to_array(mlp_model().graph.initializer[0])
    )
    before = model_sha256(path)
    (path.parent / "weights.bin").write_bytes((path.parent / "weights.bin").read_bytes()[::-1])
    assert model_sha256(path) != before


@pytest.mark.parametrize("location", ["../weights.bin", "/etc/passwd"])
def test_external_data_leaving_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    path = _external(tmp_path, location)
    with pytest.raises(ModelError, match="outside the model's folder"):
        load_model(path)
    with pytest.raises(ModelError, match="outside the model's folder"):
        model_sha256(path)


def test_a_located_model_loads_parsed_once_with_its_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``LocatedModel.load`` (what a run's plan calls): the same spec and lazy model as hashing and loading apart,
    from one parse of the file, its weights in a data file left on disk."""
    import harness.data.models as models
    import harness.data.onnxfile as onnxfile
    from harness.data.models import locate_model

    big = mlp_model(4)
    path = tmp_path / "with data" / "m.onnx"
    path.parent.mkdir()
    onnx.save_model(big, str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    found = locate_model(str(path), search_dir=tmp_path)
    parses: list[Path] = []
    real = onnxfile.parse_model

    def counted(where: Path, **kwargs: object) -> onnxfile.ParsedModel:
        parses.append(Path(where))
        return real(where, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(models, "parse_model", counted)
    monkeypatch.setattr(onnxfile, "parse_model", counted)
    spec, model = found.load(lazy_above=0)
    assert parses == [path.resolve()]
    monkeypatch.undo()
    assert spec == found.spec() and spec.sha256 == model_sha256(path)
    expected = load_model(path, weights="lazy", lazy_above=0)
    assert model.SerializeToString() == expected.SerializeToString()
    assert onnxfile.is_lazy(model)


def test_the_hash_on_its_thread_does_not_read_the_tensors_the_weights_loading_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``read_weights`` loads the small external tensors into the graph, clearing their data locations; the hash,
    which may run after that on its thread, must not read the locations then (a run said "tensor points to external
    data '', outside the model's folder"). Here the hash runs only when its result is asked for."""
    import harness.data.models as models
    from harness.core.background import PendingAnswer
    from harness.data.models import locate_model

    path = tmp_path / "my models" / "m.onnx"
    path.parent.mkdir()
    onnx.save_model(mlp_model(5), str(path), save_as_external_data=True, location="m data.bin", size_threshold=0)

    class Late(PendingAnswer[str]):
        def result(self) -> str:
            return self.box["ask"]()  # type: ignore[operator,no-any-return]

    monkeypatch.setattr(models, "answer_later", lambda ask, name: Late(thread=None, box={"ask": ask}))  # type: ignore[arg-type]
    spec, model = locate_model(str(path), search_dir=tmp_path).load()
    assert spec.sha256 == model_sha256(path)
    assert not is_lazy(model)  # every weight (all small) was read into the graph
