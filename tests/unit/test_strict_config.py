"""A typo in ``[tool.castguard]`` is a usage error naming the nearest valid key (issue 34 item 9).

The valid keys come from the declarations (harness.options.DESTS and the sub-tables), so a key another option adds
is accepted without a list here. Checked through the real paths: load_table (every reader of the table), a pytest
run from a project with the typo, and the sub-tables' own readers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import TABLE_KEYS, HarnessConfig, load_table
from harness.core.errors import UserError
from harness.options import DESTS

REPO = Path(__file__).resolve().parents[2]


def project(folder: Path, toml: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(toml)
    return folder


@pytest.mark.parametrize(
    ("typo", "nearest"),
    [
        ("goldens_dri", "goldens_dir"),
        ("cache-dir", "cache_dir"),
        ("keeps_runs", "keep_runs"),
        ("tolerance", "tolerances"),
    ],
)
def test_a_misspelt_key_names_the_nearest_valid_one(tmp_path: Path, typo: str, nearest: str) -> None:
    folder = project(tmp_path / "p", f'[tool.castguard]\n{typo} = "x"\n')
    with pytest.raises(UserError) as err:
        load_table(folder)
    assert repr(typo) in err.value.problem and f"did you mean {nearest!r}" in err.value.fix
    assert str(folder / "pyproject.toml") in str(err.value)


def test_a_key_far_from_any_still_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        load_table(project(tmp_path / "p", "[tool.castguard]\nzzz = 1\n"))
    assert "did you mean" not in err.value.fix and "goldens_dir" in err.value.fix


def test_every_declared_key_and_the_repositorys_own_table_are_valid(tmp_path: Path) -> None:
    assert set(DESTS.values()) <= TABLE_KEYS  # a key a new option adds is valid with no list to update
    table = load_table(REPO)
    assert table and set(table) <= TABLE_KEYS
    HarnessConfig.from_sources(cli={}, table=table, rootdir=REPO, invocation_dir=REPO)


def test_sub_tables_name_their_nearest_key_too(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="did you mean 'precisions'"):
        table = load_table(project(tmp_path / "s", '[tool.castguard.sweep]\nprecision = ["fp16"]\n'))
        HarnessConfig.from_sources(cli={}, table=table, rootdir=tmp_path / "s", invocation_dir=tmp_path / "s")
    with pytest.raises(UserError, match="did you mean 'atol'"):
        table = load_table(project(tmp_path / "t", "[tool.castguard.tolerances]\ny = { atl = 0.1 }\n"))
        HarnessConfig.from_sources(cli={}, table=table, rootdir=tmp_path / "t", invocation_dir=tmp_path / "t")


def test_pytest_from_a_project_with_a_typo_stops_with_one_message(tmp_path: Path) -> None:
    folder = project(tmp_path / "user project", '[tool.castguard]\ngoldens_dri = "my-goldens"\n')
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--model", "mnist.onnx", "-p", "no:cacheprovider"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]  # pytest's usage error
    assert "unknown [tool.castguard] key 'goldens_dri'" in run.stderr and "did you mean 'goldens_dir'" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (folder / "goldens").exists() and not (folder / "my-goldens").exists()
