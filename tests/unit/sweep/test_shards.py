"""``--shard K/N``: a stable assignment (pinned values), every unit of work on exactly one shard, clear errors."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core.errors import UserError
from harness.sweep.shards import Shard, assign, hash_order, key_digest, parse_shard

CASES = ["fp16-a", "fp16-b", "bf16-a", "bf16-b"]


def test_the_digest_and_order_are_pinned_sha256_values() -> None:
    """The same on every machine and Python (sha256 of the UTF-8 key, never hash())."""
    assert key_digest("mnist")[:16] == "63af3a9e54e01354"
    assert key_digest("needs_constraints")[:16] == "c0574a0af9896bb2"
    assert key_digest("transformer_block")[:16] == "99f5f197d0436c66"
    assert key_digest("résnet-50")[:16] == "8f55280ad5ac6278"
    assert hash_order(["needs_constraints", "transformer_block", "mnist"]) == (
        "mnist",
        "transformer_block",
        "needs_constraints",
    )
    models = [f"m{i:02d}" for i in range(10)]
    assert [assign(models, CASES, Shard(k, 4)).assigned_models for k in range(1, 5)] == [
        ("m02", "m07", "m09"),
        ("m01", "m06", "m08"),
        ("m03", "m04"),
        ("m00", "m05"),
    ]


def test_the_summary_line_names_the_shard_its_models_and_cases() -> None:
    models = [f"model{i}" for i in range(50)]
    work = assign(models, [f"c{i}" for i in range(12)], Shard(2, 4))
    assert work.summary() == "shard 2/4: 13 of 50 models, 156 cases"
    assert sorted(len(assign(models, ["c"], Shard(k, 4)).work) for k in range(1, 5)) == [12, 12, 13, 13]


@given(
    models=st.lists(st.text(min_size=1, max_size=12), unique=True, max_size=30),
    count=st.integers(min_value=1, max_value=9),
)
def test_every_case_of_every_model_is_on_exactly_one_shard(models: list[str], count: int) -> None:
    shards = [assign(models, CASES, Shard(k, count)) for k in range(1, count + 1)]
    units = Counter((model, case) for work in shards for model, ids in work.work for case in ids)
    assert set(units) == {(m, c) for m in models for c in CASES} and set(units.values()) <= {1}
    assert sum(w.case_count for w in shards) == len(models) * len(CASES) == shards[0].total_cases
    if len(models) >= count:  # a model's cases stay on one machine
        owners = Counter(model for work in shards for model in work.assigned_models)
        assert set(owners.values()) <= {1}
        sizes = [len(w.work) for w in shards]
        assert max(sizes) - min(sizes) <= 1


def test_fewer_models_than_shards_splits_the_cases_and_idle_shards_say_so() -> None:
    split = [assign(["mnist"], CASES[:3], Shard(k, 4)) for k in range(1, 5)]
    assert [w.work for w in split] == [
        (("mnist", ("fp16-a",)),),
        (("mnist", ("fp16-b",)),),
        (("mnist", ("bf16-a",)),),
        (),
    ]
    assert split[0].split and split[0].summary() == (
        "shard 1/4: 1 of 1 models (1 of its 3: fewer models than shards, so the cases are split), 1 case"
    )
    assert split[3].summary().startswith("shard 4/4: no work (0 of 1 models, 0 of 3 cases")
    two = [assign(["mnist", "transformer_block"], CASES, Shard(k, 5)) for k in range(1, 6)]
    # mnist (first by hash) gets shard positions 0, 2, 4, transformer_block 1, 3
    assert [w.work for w in two] == [
        (("mnist", ("fp16-a", "bf16-b")),),
        (("transformer_block", ("fp16-a", "bf16-a")),),
        (("mnist", ("fp16-b",)),),
        (("transformer_block", ("fp16-b", "bf16-b")),),
        (("mnist", ("bf16-a",)),),
    ]


@pytest.mark.parametrize("text", ["0/4", "5/4", "x", "2/0", "1/", "-1/3", "2 of 4", ""])
def test_a_bad_shard_is_one_clear_error(text: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_shard(text)
    assert str(caught.value).startswith(f"--shard {text!r}: is not a shard K/N with 1 <= K <= N")
    assert "--shard 2/4" in str(caught.value)


def test_good_shards_parse_with_or_without_spaces() -> None:
    assert parse_shard("2/4") == Shard(2, 4) and parse_shard(" 1 / 1 ") == Shard(1, 1)
    assert parse_shard("4/4").text == "4/4"
