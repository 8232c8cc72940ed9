"""The nightly workflow gates on the README's recommended rules (no max_rel: near-zero goldens decide it), and
sets its number of shards in one place."""

from __future__ import annotations

import re
from pathlib import Path

from harness.nightly.rules import RECOMMENDED_RULES, parse_rules

REPO = Path(__file__).resolve().parents[3]
WORKFLOW = (REPO / ".github" / "workflows" / "nightly.yml").read_text()


def test_the_workflow_rules_are_the_readme_recommended_rules() -> None:
    rules = re.findall(r'^  RULES: "([^"]+)"', WORKFLOW, flags=re.M)
    assert rules == [RECOMMENDED_RULES], rules
    assert "max_rel" not in rules[0] and parse_rules(rules[0])
    assert f'--fail-on-regression="{RECOMMENDED_RULES}"' in (REPO / "README.md").read_text()


def test_the_number_of_shards_is_set_once_and_the_merge_judges_the_night() -> None:
    assert len(re.findall(r"^  SHARDS: \d+", WORKFLOW, flags=re.M)) == 1
    assert "shard: ${{ fromJSON(needs.plan.outputs.shards) }}" in WORKFLOW
    assert '--shard="${{ matrix.shard }}/$SHARDS"' in WORKFLOW
    shard_job = WORKFLOW.split("\n  merge:\n")[0].split("\n  shard:\n")[1]
    commands = [line for line in shard_job.splitlines() if not line.strip().startswith("#")]
    assert not any("--baseline" in line or "--history" in line for line in commands)  # a shard never compares
    assert re.search(
        r"castguard merge .*--out \"\$MERGED_DIR\" \\\n\s+--baseline=\"\$HISTORY_DIR\" "
        r"--history=\"\$HISTORY_DIR\" --fail-on-regression=\"\$RULES\"",
        WORKFLOW,
    )
