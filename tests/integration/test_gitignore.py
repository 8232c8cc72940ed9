"""castguard's own folders ignore themselves (issue 34 item 6).

``.castguard-cache/`` (up to 2 GB, ``.lock`` files included) and ``castguard-report/`` get a ``*`` ``.gitignore``
when castguard creates them (harness.core.files.own_folder), as pytest, mypy and ruff do for their caches: in a
user's git repository, ``git status`` after a run shows the goldens (which belong in version control) and nothing
of castguard's working folders. A folder the user made before keeps its own rules.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.graphs import mlp_model, save
from tests.integration.test_any_folder import ONE_CASE, pytest_in


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_a_run_in_a_git_repository_leaves_only_the_goldens_to_commit(tmp_path: Path) -> None:
    repo = tmp_path / "user repo"
    repo.mkdir()
    git(repo, "init", "-q")
    save(mlp_model(), repo / "mlp.onnx")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@example.com", "add", "mlp.onnx")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-qm", "model")

    run = pytest_in(repo, "--model", "mlp.onnx", "-p", "no:cacheprovider", *ONE_CASE)
    assert "golden written" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    for folder in (".castguard-cache", "castguard-report"):
        assert (repo / folder).is_dir(), f"{folder} was not made: the check would prove nothing"
        assert (repo / folder / ".gitignore").read_text().splitlines()[-1] == "*"
        assert any(p.name != ".gitignore" for p in (repo / folder).rglob("*")), f"{folder} is empty"
    untracked = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert untracked, "the goldens must show up"
    assert all(line.startswith("?? goldens/") for line in untracked), untracked
    git(repo, "add", ".")
    staged = git(repo, "diff", "--cached", "--name-only").splitlines()
    assert staged and all(name.startswith("goldens/") for name in staged), staged


def test_a_report_folder_the_user_made_keeps_its_own_rules(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    mine = tmp_path / "published report"
    mine.mkdir()
    model = save(mlp_model(), tmp_path / "mlp.onnx")
    run = pytest_in(tmp_path / "empty", f"--model={model}", f"--report-dir={mine}", *ONE_CASE)
    assert "golden written" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    assert list(mine.rglob("*.jsonl")) or (mine / "runs").is_dir()
    assert not (mine / ".gitignore").exists()
    assert (tmp_path / "empty" / ".castguard-cache" / ".gitignore").is_file()
