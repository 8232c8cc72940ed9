"""A run over several models gives each model the --val-range / --input-shapes entries that name its inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import HarnessConfig
from harness.core.errors import UserError
from harness.data.models import bundled_models_dir
from harness.data.scoping import InputOptions, check_every_name_used
from harness.pipeline.session import AccuracySession
from harness.sweep import SweepSpec
from harness.sweep.shards import Shard, assign

REPO = Path(__file__).resolve().parents[3]
SPEC = SweepSpec(precisions=("fp16",), data_max=(512.0,), exclusions=SweepSpec().exclusions[:1], keep_io_types=(False,))
TEXT_OPTIONS = {"input_shapes": (("input_ids", (1, 8)),), "val_ranges": (("attention_mask", 1.0, 1.0),)}


def _session(tmp_path: Path, *models: str, **options: object) -> AccuracySession:
    config = HarnessConfig(
        models=models,
        goldens_dir=tmp_path / "goldens",
        report_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
        sweep=SPEC,
        **options,
    )  # type: ignore[arg-type]
    return AccuracySession.open(config, bundled_dir=bundled_models_dir())


def test_each_model_takes_the_entries_naming_its_inputs(tmp_path: Path) -> None:
    session = _session(tmp_path, "mnist", "needs_constraints", "bert_tiny", **TEXT_OPTIONS)
    bert = session.models["bert_tiny"]
    assert bert.recipe.input_shapes == (("input_ids", (1, 8)),)
    assert bert.recipe.val_ranges == (("attention_mask", 1.0, 1.0),)
    assert {name: feed.shape for name, feed in bert.feeds[0].items()} == {"input_ids": (1, 8), "attention_mask": (1, 8)}
    assert (bert.feeds[0]["attention_mask"] == 1).all()
    # the bundled models that no entry names keep their own inputs
    mnist = session.models["mnist"]
    assert mnist.recipe.inputs_file is not None and mnist.recipe.inputs_file.name == "digits.npz"
    assert session.models["needs_constraints"].recipe.val_ranges == (("x", 1.0, 2.0),)
    assert "--input-shapes" not in session.rerun(mnist) and "--val-range" not in session.rerun(mnist)
    assert "--input-shapes input_ids:1x8" in session.rerun(bert)


def test_a_models_inputs_id_does_not_depend_on_the_other_models(tmp_path: Path) -> None:
    alone = _session(tmp_path, "bert_tiny", **TEXT_OPTIONS).models["bert_tiny"]
    together = _session(tmp_path, "bert_tiny", "transformer_block", **TEXT_OPTIONS).models["bert_tiny"]
    assert alone.recipe.id == together.recipe.id  # the same golden file
    assert (alone.feeds[0]["input_ids"] == together.feeds[0]["input_ids"]).all()


def test_an_unnamed_range_applies_to_every_model(tmp_path: Path) -> None:
    session = _session(tmp_path, "transformer_block", "explicit_typing", val_ranges=(("", 0.0, 0.5),))
    for loaded in session.models.values():
        assert loaded.recipe.val_ranges == (("", 0.0, 0.5),)
        assert all(0.0 <= float(v.min()) and float(v.max()) <= 0.5 for v in loaded.feeds[0].values())


def test_an_entry_no_model_has_is_one_error_listing_every_models_inputs(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        _session(tmp_path, "mnist", "bert_tiny", val_ranges=(("input_idz", 0.0, 3.0),))
    text = str(caught.value)
    assert "--val-range" in text and "no model of this run has an input named 'input_idz'" in text
    assert "bert_tiny: input_ids, attention_mask" in text and "mnist: Input3" in text
    with pytest.raises(UserError, match="--input-shapes.*no model of this run has an input named 'images'"):
        _session(tmp_path, "mnist", "bert_tiny", input_shapes=(("images", (1, 3, 8, 8)),))


def test_one_model_must_have_every_named_input(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="has no input named 'input_ids'"):
        _session(tmp_path, "mnist", input_shapes=(("input_ids", (1, 8)),))


def test_a_shard_finds_a_name_in_the_models_of_other_shards(tmp_path: Path) -> None:
    models = ["mnist", "bert_tiny", "transformer_block"]
    shard = next(
        Shard(k, 3) for k in (1, 2, 3) if "bert_tiny" not in assign(models, ["c"], Shard(k, 3)).assigned_models
    )
    session = _session(tmp_path, *models, shard=shard, **TEXT_OPTIONS)  # input_ids: bert_tiny, not here
    assert "bert_tiny" not in session.models and session.models
    with pytest.raises(UserError, match="no model of this run has an input named 'input_idz'"):
        _session(tmp_path, *models, shard=shard, input_shapes=(("input_idz", (1, 8)),))


def test_input_options_keep_what_applies() -> None:
    options = InputOptions(
        val_ranges=(("", 0.0, 1.0), ("x", 1.0, 2.0), ("ids", 0.0, 9.0)), input_shapes=(("ids", (1, 4)),)
    )
    assert options.for_inputs(["x"]) == InputOptions(val_ranges=(("", 0.0, 1.0), ("x", 1.0, 2.0)))
    assert options.for_inputs(["ids", "mask"]).input_shapes == (("ids", (1, 4)),)
    assert not InputOptions() and not options.for_inputs(["y"]).input_shapes
    check_every_name_used(options, {"a": ["x"], "b": ["ids"]})
    asked: list[str] = []
    check_every_name_used(options, {"a": ["x"]}, more=lambda: asked.append("more") or {"b": ["ids"]})
    assert asked == ["more"]


def test_a_model_given_its_own_inputs_file_by_key(tmp_path: Path) -> None:
    bert_file = REPO / "test_models" / "bert_tiny" / "inputs.npz"
    session = _session(
        tmp_path,
        "bert_tiny",
        "transformer_block",
        model_inputs=(("bert_tiny", bert_file),),
        val_ranges=(("x", 0.0, 0.5),),
    )
    assert session.models["bert_tiny"].recipe.inputs_file == bert_file
    assert session.models["bert_tiny"].feeds[0]["input_ids"].shape == (2, 64)
    block = session.models["transformer_block"]
    assert block.recipe.val_ranges == (("x", 0.0, 0.5),) and float(block.feeds[0]["x"].max()) <= 0.5
    with pytest.raises(
        UserError,
        match=r"no model of this run has an input named 'attention_mask' \(the models "
        r"with their own --inputs KEY=FILE take none\)",
    ):
        _session(
            tmp_path,
            "bert_tiny",
            "transformer_block",
            model_inputs=(("bert_tiny", bert_file),),
            val_ranges=(("attention_mask", 1.0, 1.0),),
        )
    with pytest.raises(UserError, match="(?s)no model of this run has the key 'bert'.*bert_tiny, transformer_block"):
        _session(tmp_path, "bert_tiny", "transformer_block", model_inputs=(("bert", bert_file),))
