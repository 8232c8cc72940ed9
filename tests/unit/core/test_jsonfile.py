"""Every JSON file castguard reads is checked for type as well as syntax (issue 33 item 8): valid JSON of the wrong
shape is one UserError naming the file, the field and the fix, never an AttributeError."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import GoldenCorrupt, InputDataError, UserError
from harness.core.jsonfile import JsonObject, read_json
from harness.data.feedfiles import load_feed_file
from harness.data.goldens import Golden, GoldenStore
from harness.data.models import resolve_model
from harness.data.recipes import InputRecipe
from harness.nightly.history import read_run
from harness.report.io import read_report, read_shard_marker
from harness.tune.memo import TuneCache
from harness.tune.plan import read_plan
from tests.helpers.graphs import mlp_model, save

pytest_plugins = ["pytester"]


def test_the_helper_names_the_file_the_field_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"n": True, "xs": [1, "b"], "o": {"k": []}, "f": 3}))
    doc = JsonObject.read(path, what="thing file", fix="rewrite it")
    assert doc.get("f", float) == 3.0 and doc.get("missing", str, "d") == "d"
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: doc.get("n", int), "field 'n' is true/false, expected an integer"),
        (lambda: doc.items("xs", int), "field 'xs' item 1 is a string, expected an integer"),
        (lambda: doc.object("o").get("k", str), "field 'o.k' is a list, expected a string"),
        (lambda: doc.get("missing", str), "field 'missing' is missing"),
        (lambda: doc.object("xs"), "field 'xs' is a list, expected an object"),
    ]
    for call, problem in cases:
        with pytest.raises(UserError) as err:
            call()
        assert str(err.value) == f"{path}: thing file: {problem}\n  fix: rewrite it"
    path.write_text("null")
    with pytest.raises(UserError, match="the thing file holds null, not a JSON object"):
        JsonObject.read(path, what="thing file", fix="-")
    path.write_text("{")
    with pytest.raises(InputDataError, match="unreadable thing file: not valid JSON"):
        read_json(path, what="thing file", fix="-", error=InputDataError)


@pytest.fixture
def golden_sidecar(tmp_path: Path) -> tuple[GoldenStore, object, InputRecipe, Path]:
    spec = resolve_model(str(save(mlp_model(), tmp_path / "mlp.onnx")), search_dir=tmp_path)
    store, recipe = GoldenStore(tmp_path / "goldens"), InputRecipe(seed=2)
    x = np.ones((1, 8), np.float32)
    path = store.write(spec, recipe, Golden(feeds=[{"x": x}], outputs=[{"y": x}], meta={"producer": "t"}))
    return store, spec, recipe, store.sidecar(path)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("inputs", [], "field 'inputs' is a list, expected an object"),
        ("inputs", {"id": 5}, "field 'inputs.id' is an integer, expected a string"),
        ("iterations", "1", "field 'iterations' is a string, expected an integer"),
        ("bf16_keys", {}, "field 'bf16_keys' is an object, expected a list"),
        ("model_sha256", None, "field 'model_sha256' is null, expected a string"),
    ],
)
def test_a_golden_sidecar_of_the_wrong_type(golden_sidecar: tuple, field: str, value: object, said: str) -> None:
    store, spec, recipe, side = golden_sidecar
    meta = json.loads(side.read_text())
    meta[field] = value
    side.write_text(json.dumps(meta))
    with pytest.raises(GoldenCorrupt) as err:
        store.load(spec, recipe)
    assert str(err.value).startswith(f"{side}: golden sidecar: {said}") and "--update-goldens" in err.value.fix


@pytest.mark.parametrize("content", ["null", "[]", '"x"', "3"])
def test_every_reader_refuses_a_file_that_is_not_an_object(tmp_path: Path, content: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(content)
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "k.json").write_text(content)
    readers: list[Callable[[], object]] = [
        lambda: read_plan(path),
        lambda: TuneCache(tmp_path).load("k"),
        lambda: read_run(path),
        lambda: read_report(path),
        lambda: read_shard_marker(path),
    ]
    for read in readers:
        with pytest.raises(UserError) as err:
            read()
        assert err.value.where == str(path if read is not readers[1] else tmp_path / "tune" / "k.json")
    with pytest.raises(InputDataError, match="expected a non-empty JSON list"):
        load_feed_file(path)


def test_a_tune_cache_entry_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "k.json").write_text(json.dumps({"schema_version": 1, "evaluations": {"a": 3}}))
    with pytest.raises(UserError, match="field 'evaluations.a' is an integer, expected an object"):
        TuneCache(tmp_path).load("k")


def test_a_wrong_typed_sidecar_in_a_run_is_one_error_per_case_not_a_traceback(pytester: pytest.Pytester) -> None:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    args = ("-p", "no:randomly", "--model", "models/mlp.onnx", "--precision", "fp16", "--data-max", "512")
    args += ("--exclude-ops", "none", "--keep-io-types", "false")
    pytester.runpytest(*args).assert_outcomes(passed=1, failed=1)
    side = next((pytester.path / "goldens").rglob("*.json"))
    side.write_text(json.dumps({**json.loads(side.read_text()), "inputs": []}))
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "AttributeError" not in out and "Traceback" not in out and "INTERNALERROR" not in out
    assert out.count("golden sidecar: field 'inputs' is a list, expected an object") >= 2
