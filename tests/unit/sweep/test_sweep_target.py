"""``target`` in the sweep: case ids, converter options, pyproject / command-line sources, bad values."""

from __future__ import annotations

import pytest

from harness.core.errors import UserError
from harness.sweep import SweepPoint, SweepSpec, expand
from harness.sweep.sources import SweepOptions, build_sweep_spec


def test_target_reaches_the_converter_and_the_id_only_when_set() -> None:
    assert SweepPoint().id == "fp16-dmax512-imax65504-excl_none-keepio0-emulate"
    case = SweepPoint(precision="bf16", target="ort-cuda")
    assert case.id.endswith("-emulate-tgt_ort-cuda")
    assert case.convert_options().target == "ort-cuda"
    assert {c.target for c in expand(SweepSpec(target="ort-cuda"))} == {"ort-cuda"}


def test_target_from_pyproject_then_the_command_line() -> None:
    spec = build_sweep_spec(tables=[("pyproject.toml [tool.castguard.sweep]", {"target": "tensorrt"})])
    assert spec.target == "tensorrt"
    spec = build_sweep_spec(
        tables=[("pyproject.toml", {"target": "tensorrt"})], options=SweepOptions(target="ort-cuda")
    )
    assert spec.target == "ort-cuda"


def test_unknown_target_is_one_clear_error() -> None:
    with pytest.raises(UserError, match="'ort-rocm' is not one of any, ort-cuda, tensorrt"):
        build_sweep_spec(options=SweepOptions(target="ort-rocm"))
