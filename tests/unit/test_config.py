"""HarnessConfig: [tool.castguard] defaults, command-line precedence, validation; the CLI's subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import HarnessConfig, find_project, load_table
from harness.core.errors import UserError
from harness.options import add_options, given_options
from tests.helpers.graphs import mlp_model, save


def _parse(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument)
    return given_options(parser.parse_args(list(argv)))


def test_defaults_are_real(tmp_path: Path) -> None:
    config = HarnessConfig.from_sources(cli=_parse(), table={}, rootdir=tmp_path, invocation_dir=tmp_path)
    assert config.runners == ("emulate",) and config.seed == 0 and config.iterations == 1
    assert config.goldens_dir == tmp_path / "goldens" and not config.update_goldens


def test_cli_overrides_pyproject_and_paths_resolve_per_source(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.castguard]\nrunners = ["reference"]\nseed = 3\n'
        'goldens_dir = "gold"\nval_ranges = ["x:[1,2]"]\nreport_dir = "r"\n'
    )
    table = load_table(tmp_path)
    run_dir = tmp_path / "sub"
    config = HarnessConfig.from_sources(
        cli=_parse("--runner", "emulate", "--runner", "ort", "--seed", "5"),
        table=table,
        rootdir=tmp_path,
        invocation_dir=run_dir,
    )
    assert config.runners == ("emulate", "ort") and config.seed == 5
    assert config.goldens_dir == (tmp_path / "gold").resolve() and config.val_ranges == (("x", 1.0, 2.0),)
    cli_dir = HarnessConfig.from_sources(
        cli=_parse("--goldens-dir", "g2"), table=table, rootdir=tmp_path, invocation_dir=run_dir
    )
    assert cli_dir.goldens_dir == (run_dir / "g2").resolve()


@pytest.mark.parametrize(
    ("cli", "table", "match"),
    [
        (("--runner", "gpu"), {}, "unknown runner"),
        (("--runner", "ort", "--runner", "ort"), {}, "repeated value"),
        ((), {"seed": "zero"}, "expected an integer"),
        ((), {"runners": 3}, "list of strings"),
        (("--iterations", "0"), {}, ">= 1"),
        (("--inputs", "a.npz", "--val-range", "x:[0,1]"), {}, "cannot be combined"),
        ((), {"models": ["mnist"]}, "only be given on the command line"),
        ((), {"update_goldens": True}, "only be given on the command line"),
    ],
)
def test_invalid_configuration_is_a_user_error(
    tmp_path: Path, cli: tuple[str, ...], table: dict[str, object], match: str
) -> None:
    with pytest.raises(UserError, match=match):
        HarnessConfig.from_sources(cli=_parse(*cli), table=table, rootdir=tmp_path, invocation_dir=tmp_path)


def test_broken_pyproject_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.castguard\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_table(tmp_path)
    assert load_table(tmp_path / "none") == {}


def test_cli_goldens_writes_then_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = save(mlp_model(), tmp_path / "mlp.onnx")
    argv = ["goldens", "--model", str(model), "--rootdir", str(tmp_path)]
    assert main(argv) == 0 and "golden written" in capsys.readouterr().out  # what was asked: exit 0 (issue 34.5)
    assert main(argv) == 0 and "mlp: pass" in capsys.readouterr().out


def test_cli_models_lists_the_bundled_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "mnist" in out and "digits.npz" in out and "needs_constraints" in out


def test_the_project_is_the_nearest_folder_with_a_castguard_table(tmp_path: Path) -> None:
    project, deep, other = tmp_path / "project", tmp_path / "project" / "a" / "b", tmp_path / "other"
    deep.mkdir(parents=True)
    other.mkdir()
    (project / "pyproject.toml").write_text("[tool.castguard]\n")  # an empty table counts
    (project / "a" / "pyproject.toml").write_text("[tool.black]\n")  # no table: not a project
    (deep / "pyproject.toml").write_text("not toml [")  # unreadable: skipped
    assert find_project(deep, fallback=other) == project
    assert find_project(project, fallback=other) == project
    assert find_project(other, fallback=other) == other  # none: pytest's rootdir


def test_the_trt_build_check_setting_comes_from_either_flag_or_pyproject(tmp_path: Path) -> None:
    def config(*cli: str, table: dict[str, object] | None = None) -> HarnessConfig:
        return HarnessConfig.from_sources(
            cli=_parse(*cli), table=table or {}, rootdir=tmp_path, invocation_dir=tmp_path
        )

    assert config().trt_build_check is None  # auto: on when TensorRT is installed
    assert config("--trt-build-check").trt_build_check is True
    assert config("--no-trt-build-check", table={"trt_build_check": True}).trt_build_check is False
    assert config(table={"trt_build_check": False}).trt_build_check is False
    with pytest.raises(UserError, match=r"\[tool.castguard\] trt_build_check.*expected true or false, got 'yes'"):
        config(table={"trt_build_check": "yes"})


def test_inputs_for_every_model_and_for_one_model_by_key(tmp_path: Path) -> None:
    odd = tmp_path / "run=3.npz"  # an existing file whose name has "=" is a file, not KEY=FILE
    odd.write_bytes(b"")
    config = HarnessConfig.from_sources(
        cli=_parse("--inputs", "all.npz", "--inputs=bert=data/bert.npz"),
        table={},
        rootdir=tmp_path,
        invocation_dir=tmp_path,
    )
    assert config.inputs_file == tmp_path / "all.npz"
    assert config.model_inputs == (("bert", tmp_path / "data" / "bert.npz"),)
    plain = HarnessConfig.from_sources(
        cli=_parse("--inputs", "run=3.npz"), table={}, rootdir=tmp_path, invocation_dir=tmp_path
    )
    assert plain.inputs_file == odd and plain.model_inputs == ()
    keyed = HarnessConfig.from_sources(
        cli=_parse("--inputs", "bert=b.npz", "--val-range", "x:[0,1]"),
        table={},
        rootdir=tmp_path,
        invocation_dir=tmp_path,
    )  # ranges for the other models
    assert keyed.inputs_file is None and keyed.val_ranges == (("x", 0.0, 1.0),)
    with pytest.raises(UserError, match="2 inputs files for every model"):
        HarnessConfig.from_sources(
            cli=_parse("--inputs", "a.npz", "--inputs", "b.npz"), table={}, rootdir=tmp_path, invocation_dir=tmp_path
        )
    with pytest.raises(UserError, match="model 'bert' is given two inputs files"):
        HarnessConfig.from_sources(
            cli=_parse("--inputs", "bert=a.npz", "--inputs", "bert=b.npz"),
            table={},
            rootdir=tmp_path,
            invocation_dir=tmp_path,
        )
