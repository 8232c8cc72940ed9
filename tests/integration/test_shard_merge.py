"""One night as shards: ``pytest --shard K/3`` x 3 plus ``castguard merge`` gives what one whole run gives.

Real pytest processes on three bundled models (a reduced 4-case sweep each, 12 cases), each with its own report
folder and a cold cache, against the committed goldens:

* the whole run and the merged shards have the same cases, statuses and figures (timings, cache notes and the
  outputs' run folder aside), and the same verdict against a stored baseline (``--fail-on-regression``);
* ``castguard recheck`` works on the merged folder;
* a shard killed (SIGKILL, by a plugin at its second case) leaves an incomplete merged night: the finished cases
  are all there, the unfinished ones are absent, the exit status is 1, and the history never uses it as a baseline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.nightly.baseline import load_baseline
from harness.nightly.history import read_history
from tests.conftest import run_castguard

REPO = Path(__file__).resolve().parents[2]
MODELS = ["--model", "mnist", "--model", "needs_constraints", "--model", "transformer_block"]
SWEEP = ["--precision", "fp16", "--data-max", "512,inf"]  # x (none, sensitive): 4 cases per model
RULES = "status,error:+25%,lowp_share:-2pp"
KILLER = """
import os, signal
_seen = []
def pytest_runtest_logreport(report):
    if report.when == "call" and "test_low_precision[" in report.nodeid:
        _seen.append(report.nodeid)
        if len(_seen) == 2:              # its record is written (makereport) before this hook
            os.kill(os.getpid(), signal.SIGKILL)
"""
UNSTABLE = ("timings", "outputs_file", "golden_file", "conversion_cached")


def night_args(folder: Path, name: str) -> tuple[str, ...]:
    """What every pytest run of the night passes: the models, the sweep, the committed goldens, a report folder of
    its own and a cold cache."""
    report, cache = f"--report-dir={folder / name}", f"--cache-dir={folder / f'cache-{name}'}"
    return (*MODELS, *SWEEP, f"--goldens-dir={REPO / 'goldens'}", report, cache)


def comparable(report: dict) -> list[dict]:
    """The cases less what differs between any two runs (timings, the run folder, cache hits)."""
    cases = []
    for case in report["cases"]:
        kept = {k: v for k, v in case.items() if k not in UNSTABLE}
        kept = json.loads(re.sub(r"[^\s'\"]*/fixes/", "FIXES/", json.dumps(kept)))  # fix's path
        if kept.get("trt_build"):  # the TensorRT build check's time (when TensorRT is installed)
            kept["trt_build"] = {k: v for k, v in kept["trt_build"].items() if k != "seconds"}
        cases.append(kept)
    return cases


def section(markdown: str, title: str) -> str:
    found = re.search(rf"^## {title}\n(.*?)(?=^## )", markdown, flags=re.S | re.M)
    assert found is not None, markdown[:2000]
    return found[1]


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shards 1/3 and 3/3 of the night (shard 2/3 is run by each test) and a stored baseline."""
    folder = tmp_path_factory.mktemp("night")
    for k in (1, 3):
        done = run_castguard(folder, *night_args(folder, f"shard{k}"), f"--shard={k}/3", timeout=300).proc
        assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
        assert f"castguard shard {k}/3: 1 of 3 models, 4 cases" in done.stdout
    baseline = json.loads((folder / "shard3" / "report.json").read_text())  # needs_constraints' 4 cases
    assert [c["status"] for c in baseline["cases"]].count("fail") == 2  # it overflows at data_max inf
    for case in baseline["cases"]:  # the stored baseline: those cases passed "last night"
        case["status"] = "pass"
    (folder / "baseline.json").write_text(json.dumps(baseline))
    return folder


def test_three_shards_merged_are_the_whole_run_with_the_same_verdict(night: Path) -> None:
    gate = [f"--baseline={night / 'baseline.json'}", f"--fail-on-regression={RULES}"]
    whole = run_castguard(night, *night_args(night, "judged"), *gate, timeout=300).proc
    shard = run_castguard(night, *night_args(night, "shard2"), "--shard", "2/3", timeout=300).proc
    assert shard.returncode == 0 and "castguard shard 2/3: 1 of 3 models, 4 cases" in shard.stdout, shard.stdout
    merged = run_castguard(
        night, "merge", "shard1", "shard2", "shard3", "--out", "merged", *gate, tool="castguard", timeout=300
    ).proc
    assert merged.returncode == whole.returncode == 1, merged.stdout + merged.stderr  # 2 regressions each
    assert "castguard merge: 3 of 3 shards complete" in merged.stdout
    ours, theirs = (json.loads((night / d / "report.json").read_text()) for d in ("merged", "judged"))
    assert len(ours["cases"]) == 12 and ours["planned_cases"] == theirs["planned_cases"] == 12
    assert comparable(ours) == comparable(theirs)  # cases, statuses, figures, notes
    assert (
        ours["summary"] == theirs["summary"] == {"pass": 10, "fail": 2, "xfail": 0, "xpass": 0, "skip": 0, "error": 0}
    )
    assert [s["state"] for s in ours["shards"]] == ["complete"] * 3 and not ours["interrupted"]
    assert all(s["provenance"]["hostname"] for s in ours["shards"])
    verdicts = [section((night / d / "report.md").read_text(), "Baseline comparison") for d in ("merged", "judged")]
    assert verdicts[0] == verdicts[1] and "2 regression(s)" in verdicts[0] and "New cases" in verdicts[0]
    for case in ours["cases"]:  # every shard's outputs came along
        assert (night / "merged" / case["outputs_file"]).is_file()
    recheck = run_castguard(night, "recheck", "merged", tool="castguard", timeout=300).proc
    assert "12 of 12 case(s) rechecked" in recheck.stdout and recheck.returncode == 1, recheck.stdout + recheck.stderr


def test_a_killed_shard_makes_an_incomplete_night_that_is_never_a_baseline(night: Path) -> None:
    (night / "plugins").mkdir(exist_ok=True)
    (night / "plugins" / "cg_killer.py").write_text(KILLER)
    killer = ("--shard=2/3", "-p", "cg_killer")
    killed = run_castguard(
        night, *night_args(night, "killed2"), *killer, extra_path=[night / "plugins"], timeout=300
    ).proc
    assert killed.returncode == -9, killed.stdout[-2000:]
    history = ["--history=history"]
    first = run_castguard(
        night, "merge", "shard1", "shard3", "killed2", "--out", "incomplete", *history, tool="castguard", timeout=300
    ).proc
    assert first.returncode == 1, first.stdout + first.stderr
    assert "the merged run is INCOMPLETE" in first.stdout
    assert "shard 2/3: killed (2 of 4 cases)" in first.stdout
    assert re.search(r"castguard: incomplete: 10 of 12 cases \(shard 2/3 killed\)", first.stdout), first.stdout
    run = next((night / "incomplete" / "runs").iterdir())
    report = json.loads((run / "report.json").read_text())
    assert report["interrupted"] is True and report["planned_cases"] == 12
    assert not (night / "incomplete" / "report.json").exists()  # never published as the latest report
    by_model = {
        m: [c for c in report["cases"] if c["model"] == m] for m in ("mnist", "needs_constraints", "transformer_block")
    }
    assert [len(cases) for cases in by_model.values()] == [4, 4, 2]  # nothing lost, nothing claimed
    assert "**Incomplete: 10 of 12 cases (shard 2/3 killed).**" in (run / "report.md").read_text()
    assert "| 2/3 | killed: no report.json" in (run / "report.md").read_text()
    runs = read_history(night / "history").runs
    assert [r.unclean_reason for r in runs] == ["incomplete"]
    baseline, note = load_baseline(night / "history")
    assert baseline is None and "1 incomplete" in note, note
    missing = run_castguard(
        night, "merge", "shard1", "shard3", "--out", "two", tool="castguard", timeout=300
    ).proc  # shard 2 not given at all
    assert missing.returncode == 1 and "shard 2/3: missing" in missing.stdout
