"""Reading and checking shard folders (``harness.report.merge``): refusals name both folders and the difference,
version differences are flagged, and every way a shard can end has its state."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.core.errors import UserError
from harness.report.merge import merge_shards
from harness.report.model import Provenance
from tests.helpers.report_samples import PROVENANCE
from tests.helpers.shards import IDS, info, shard


def test_two_complete_shards_merge_into_every_case(tmp_path: Path) -> None:
    merged = merge_shards([shard(tmp_path / "a", info(1)), shard(tmp_path / "b", info(2))])
    assert merged.complete and merged.planned_cases == 4 and len(merged.records) == 4
    assert [(s.index, s.state, s.cases, s.assigned) for s in merged.shards] == [
        (1, "complete", 2, 2),
        (2, "complete", 2, 2),
    ]
    assert merged.notes == () and merged.provenance.hostname == "ci-runner"


def test_killed_interrupted_failed_and_missing_shards_make_it_incomplete(tmp_path: Path) -> None:
    killed = merge_shards([shard(tmp_path / "a", info(1)), shard(tmp_path / "b", info(2), cases=1, finished=False)])
    assert not killed.complete and len(killed.records) == 3
    assert killed.shards[1].state == "killed" and "1 of its 2 cases recovered" in killed.shards[1].note
    stopped = merge_shards([shard(tmp_path / "c", info(1)), shard(tmp_path / "d", info(2), cases=1, interrupted=True)])
    assert stopped.shards[1].state == "interrupted"
    crashed = merge_shards([shard(tmp_path / "e", info(1)), shard(tmp_path / "f", info(2, exit_status=3))])
    assert crashed.shards[1].state == "failed" and "pytest exit status 3" in crashed.shards[1].note
    short = merge_shards([shard(tmp_path / "g", info(1)), shard(tmp_path / "h", info(2), cases=1)])
    assert short.shards[1].state == "failed" and f"none for beta / {IDS[1]}" in short.shards[1].note
    alone = merge_shards([shard(tmp_path / "i", info(1))])
    assert [s.state for s in alone.shards] == ["complete", "missing"] and not alone.complete


def test_a_torn_last_line_of_a_killed_shard_is_dropped_and_counted(tmp_path: Path) -> None:
    folder = shard(tmp_path / "b", info(2), cases=1, finished=False)
    case_file = next(folder.glob("runs/*/cases/*.jsonl"))
    case_file.write_text(case_file.read_text() + '{"model": "be')
    merged = merge_shards([shard(tmp_path / "a", info(1)), folder])
    assert "1 of its 2 cases recovered; 1 damaged last line(s) dropped" in merged.shards[1].note


@pytest.mark.parametrize(
    ("changes", "provenance", "difference"),
    [
        (
            {},
            dataclasses.replace(PROVENANCE, castguard="0.2.0"),
            "the castguard version: shard 1/2 (A) has 0.1.0, shard 2/2 (B) has 0.2.0",
        ),
        ({"settings": (("sweep precisions", "('fp16', 'bf16')"),)}, PROVENANCE, "the setting 'sweep precisions'"),
        (
            {"goldens": (("shared/seed0.npz", "ef" * 32),)},
            PROVENANCE,
            "the golden shared/seed0.npz: shard 1/2 (A) has sha256 cdcdcdcdcdcd, shard 2/2 (B) has sha256 efef",
        ),
        ({"models": ("alpha", "beta", "gamma")}, PROVENANCE, "the models"),
        ({"count": 3}, PROVENANCE, "the number of shards: shard 1/2 (A) has N=2"),
    ],
)
def test_shards_of_different_nights_are_refused_naming_both(
    tmp_path: Path, changes: dict[str, object], provenance: Provenance, difference: str
) -> None:
    first = shard(tmp_path / "A", info(1))
    second = shard(tmp_path / "B", info(2, **changes), provenance=provenance)
    with pytest.raises(UserError) as caught:
        merge_shards([first, second])
    message = str(caught.value).replace(str(tmp_path) + "/", "")
    assert message.startswith("A and B: the shards disagree on ") and difference in message, message
    assert "re-run the odd shard" in message


def test_other_version_differences_are_flagged_not_refused(tmp_path: Path) -> None:
    newer = dataclasses.replace(PROVENANCE, onnxruntime="1.32.0", hostname="gpu-2", gpu="1x NVIDIA H100")
    merged = merge_shards([shard(tmp_path / "a", info(1)), shard(tmp_path / "b", info(2), provenance=newer)])
    assert merged.complete
    assert merged.notes == ("the shards ran with different onnxruntime: shard 1/2: 1.31.1; shard 2/2: 1.32.0",)
    shard_two = dataclasses.replace(merged.shards[1].provenance, converter_sources=())  # added from its cases
    assert merged.provenance.hostname == "ci-runner; gpu-2" and shard_two == newer


def test_the_same_shard_twice_or_a_folder_without_shards_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="both hold shard 1/2"):
        merge_shards([shard(tmp_path / "a", info(1)), shard(tmp_path / "b", info(1))])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"holds no shard run \(no runs/<id>/shard.json\)"):
        merge_shards([tmp_path / "empty"])
    with pytest.raises(UserError, match="shard folder not found"):
        merge_shards([tmp_path / "nowhere"])
    marker = next(shard(tmp_path / "c", info(1), finished=False).glob("runs/*/shard.json"))
    marker.write_text(json.dumps({"castguard_shard": 99}))
    with pytest.raises(UserError, match="shard marker"):
        merge_shards([tmp_path / "c"])


def test_shards_sharing_one_report_folder_are_named_as_the_cause(tmp_path: Path) -> None:
    shared = shard(tmp_path / "one", info(1))
    shard(shared, info(2))  # the second shard's run is now the folder's newest
    merged = merge_shards([shared])
    assert [s.state for s in merged.shards] == ["missing", "complete"]
    note = merged.shards[0].note
    assert f"{shared} holds an older run of it" in note and "give each its own" in note, note
    with pytest.raises(UserError, match=r"(?s)both hold shard 2/2 \(the same run\).*give each its own"):
        merge_shards([shared, shared])
