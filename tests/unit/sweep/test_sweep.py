"""The sweep grid, its ids, its layered configuration, and the default tolerances."""

from __future__ import annotations

import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from harness.core.errors import UserError
from harness.judge.compare import Tolerance, compare_iterations
from harness.judge.tolerances import TolerancePolicy, default_tolerance, low_precision_ulp, parse_tolerance_policy
from harness.sweep import (
    SENSITIVE_OPS,
    ExclusionSet,
    SweepOptions,
    SweepPoint,
    SweepSpec,
    build_sweep_spec,
    expand,
    format_number,
    load_sweep_spec,
    parse_node_precisions,
)

# ---- grid and ids -------------------------------------------------------------------------------------------


def test_default_grid_is_12_readable_unique_cases() -> None:
    cases = expand(SweepSpec())
    ids = [case.id for case in cases]
    assert len(cases) == SweepSpec().size == 12
    assert len(set(ids)) == 12
    assert ids[0] == "fp16-dmax8-imax65504-excl_none-keepio0-emulate"
    assert "bf16-dmaxinf-imax65504-excl_sensitive-keepio0-emulate" in ids
    assert not any(c.keep_io_types for c in cases)  # not swept by default (harness.sweep.sources)
    assert {c.exclusion for c in cases} == {ExclusionSet("none"), ExclusionSet("sensitive", SENSITIVE_OPS)}


def test_ids_do_not_depend_on_axis_order() -> None:
    forward = SweepSpec(precisions=("fp16", "bf16"), data_max=(64.0, math.inf), keep_io_types=(False, True))
    backward = SweepSpec(precisions=("bf16", "fp16"), data_max=(math.inf, 64.0), keep_io_types=(True, False))
    assert {c.id for c in expand(forward)} == {c.id for c in expand(backward)}
    assert (
        parse_node_precisions("Sub:fp32,Add:fp16", where="x")
        == parse_node_precisions("Add:fp16, Sub:fp32", where="x")
        == (("Add", "fp16"), ("Sub", "fp32"))
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [(512.0, "512"), (65504.0, "65504"), (math.inf, "inf"), (0.5, "0.5"), (1e20, "1e20"), (1e-5, "1e-05"), (0.0, "0")],
)
def test_numbers_in_ids_are_exact_without_trailing_zeros(value: float, text: str) -> None:
    assert format_number(value) == text


def test_optional_settings_appear_in_the_id_only_when_set() -> None:
    assert SweepPoint().id == "fp16-dmax512-imax65504-excl_none-keepio0-emulate"
    forced = SweepPoint(data_max=math.inf, node_precisions=(("Add", "fp16"), ("Sub", "fp32")), fp32_accumulation=True)
    assert forced.id == "fp16-dmaxinf-imax65504-excl_none-keepio0-emulate-np_Add.fp16+Sub.fp32-acc32"


def test_unsafe_node_names_are_sanitised_and_still_distinct() -> None:
    slash = SweepPoint(node_precisions=(("a/b", "fp32"),)).id
    colon = SweepPoint(node_precisions=(("a:b", "fp32"),)).id
    assert slash != colon
    assert all(ch.isalnum() or ch in "_.+-" for ch in slash + colon)


def test_case_maps_onto_converter_options() -> None:
    case = SweepPoint(
        precision="bf16",
        data_max=64.0,
        init_max=1000.0,
        exclusion=ExclusionSet("attn", ("Softmax",)),
        keep_io_types=True,
        node_precisions=(("Add", "fp32"),),
        fp32_accumulation=True,
    )
    options = case.convert_options()
    assert (options.low_precision_type, options.data_max, options.init_max, options.keep_io_types) == (
        "bf16",
        64.0,
        1000.0,
        True,
    )
    assert options.op_types_to_exclude == ("Softmax",)
    assert options.node_precisions == (("Add", "fp32"),) and options.fp32_accumulation


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"precisions": ("fp8",)}, "fp8"),
        ({"data_max": (-1.0,)}, "non-negative"),
        ({"data_max": (math.nan,)}, "non-negative"),
        ({"data_max": (512.0, 512.0)}, "repeated"),
        ({"runners": ()}, "empty"),
        ({"runners": ("bad name",)}, "runner"),
        ({"node_precisions": (("Add", "int8"),)}, "int8"),
    ],
)
def test_invalid_specs_are_user_errors(kwargs: dict, words: str) -> None:
    with pytest.raises(UserError, match=words):
        SweepSpec(**kwargs)


def test_exclusion_set_names_and_ops_are_checked() -> None:
    with pytest.raises(UserError, match="identifier"):
        ExclusionSet("my set")
    with pytest.raises(UserError, match="op type"):
        ExclusionSet("ok", ("Soft max",))


# ---- layered configuration -----------------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_precedence_defaults_pyproject_file_cli(tmp_path: Path) -> None:
    pyproject = _write(
        tmp_path / "pyproject.toml",
        """
[tool.castguard.sweep]
precisions = ["bf16"]
data_max = [64, inf]
keep_io_types = "false"
[tool.castguard.sweep.exclusion_sets]
attention = ["Softmax", "MatMul"]
""",
    )
    sweep_file = _write(tmp_path / "sweep.toml", 'data_max = [128]\nexclusions = ["attention"]\n')
    assert load_sweep_spec(pyproject=pyproject).data_max == (64.0, math.inf)
    from_files = load_sweep_spec(pyproject=pyproject, sweep_file=sweep_file)
    assert (from_files.precisions, from_files.data_max, from_files.keep_io_types) == (("bf16",), (128.0,), (False,))
    assert from_files.exclusions == (ExclusionSet("attention", ("Softmax", "MatMul")),)
    assert from_files.init_max == SweepSpec().init_max
    options = SweepOptions(
        precision="fp16,bf16",
        data_max="64,512,inf",
        keep_io_types="both",
        exclude_ops=("none,mine=LayerNormalization+Pow",),
        node_precisions="Add:fp16",
    )
    spec = load_sweep_spec(pyproject=pyproject, sweep_file=sweep_file, options=options)
    assert spec.precisions == ("fp16", "bf16") and spec.data_max == (64.0, 512.0, math.inf)
    assert spec.keep_io_types == (False, True) and spec.node_precisions == (("Add", "fp16"),)
    assert [s.name for s in spec.exclusions] == ["none", "mine"]
    assert [c.id for c in expand(spec)][:2] == [
        "fp16-dmax64-imax65504-excl_none-keepio0-emulate-np_Add.fp16",
        "fp16-dmax64-imax65504-excl_none-keepio1-emulate-np_Add.fp16",
    ]


def test_pyproject_without_a_sweep_table_gives_the_defaults(tmp_path: Path) -> None:
    pyproject = _write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    assert load_sweep_spec(pyproject=pyproject) == SweepSpec()


@pytest.mark.parametrize(
    ("options", "where", "problem"),
    [
        (SweepOptions(precision="fp16,fp8"), "--precision", "fp8"),
        (SweepOptions(data_max="64,abc"), "--data-max", "'abc' is not a number"),
        (SweepOptions(init_max="-3"), "--init-max", "non-negative"),
        (SweepOptions(data_max="64,,inf"), "--data-max", "empty item"),
        (SweepOptions(keep_io_types="maybe"), "--keep-io-types", "keep_io_types choice"),
        (SweepOptions(exclude_ops=("attention",)), "--exclude-ops", "no exclusion set named 'attention'"),
        (SweepOptions(exclude_ops=("bad-name=Softmax",)), "--exclude-ops", "identifier"),
        (SweepOptions(exclude_ops=("none=Softmax",)), "--exclude-ops", "must stay empty"),
        (SweepOptions(node_precisions="Add=fp16"), "--node-precisions", "bad node precision"),
        (SweepOptions(node_precisions="Add:fp16,Add:fp32"), "--node-precisions", "repeated"),
    ],
)
def test_bad_options_name_the_option_problem_and_fix(options: SweepOptions, where: str, problem: str) -> None:
    with pytest.raises(UserError) as err:
        build_sweep_spec(options=options)
    assert where in str(err.value.where) and problem in err.value.problem and err.value.fix


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ({"precision": ["fp16"]}, "precision", "unknown sweep key"),
        ({"precisions": ["fp16", "fp8"]}, "precisions", "'fp8' is not one of"),
        ({"tool": {}}, "tool", "belongs in pyproject.toml"),
        ({"data_max": [64, True]}, "data_max", "not a number"),
        ({"keep_io_types": [1, 0]}, "keep_io_types", "keep_io_types choice"),
        ({"fp32_accumulation": "yes"}, "fp32_accumulation", "not a boolean"),
        ({"node_precisions": ["Add:fp16"]}, "node_precisions", "not a table"),
        ({"runners": [3]}, "runners", "list of strings"),
        ({"exclusion_sets": {"x": ["Soft max"]}}, "exclusion_sets.x", "not an ONNX op type"),
    ],
)
def test_bad_table_values_name_the_source_and_key(table: dict, key: str, problem: str) -> None:
    with pytest.raises(UserError) as err:
        build_sweep_spec(tables=[("my.toml", table)])
    assert "my.toml" in str(err.value.where) and key in str(err.value.where) and problem in err.value.problem


def test_unreadable_files_are_user_errors_naming_them(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found") as err:
        load_sweep_spec(sweep_file=tmp_path / "missing.toml")
    assert "missing.toml" in str(err.value)
    broken = _write(tmp_path / "broken.toml", "data_max = [64,\n")
    with pytest.raises(UserError, match="not valid TOML") as err:
        load_sweep_spec(sweep_file=broken)
    assert "broken.toml" in str(err.value)


# ---- default tolerances -------------------------------------------------------------------------------------


def test_default_tolerance_scales_with_epsilon_and_the_goldens_ulp() -> None:
    golden = np.array([-3.0, 0.25, 1.5], dtype=np.float32)  # scale 3 -> ulp = eps * 2
    fp16, bf16 = default_tolerance("fp16", golden), default_tolerance("bf16", golden)
    assert (fp16.atol, fp16.rtol, fp16.mode) == (8 * 2 * 2.0**-10, 2 * 2.0**-10, "elemwise")
    assert (bf16.atol, bf16.rtol) == (8 * 2 * 2.0**-7, 2 * 2.0**-7)
    assert default_tolerance("fp16", golden * 1024).atol == fp16.atol * 1024
    assert fp16.atol > 1e-5 and fp16.rtol > 1e-5  # never Polygraphy's fp32 default


def test_default_tolerance_edge_goldens() -> None:
    assert default_tolerance("fp16", np.array([1, 7], dtype=np.int64)) == Tolerance(atol=0.0, rtol=0.0)
    tiniest = float(ml_dtypes.finfo(np.float16).smallest_subnormal)
    assert default_tolerance("fp16", np.zeros(4, np.float32)).atol == 8 * tiniest
    with_inf = np.array([np.inf, np.nan, 2.0], dtype=np.float32)
    assert default_tolerance("bf16", with_inf) == default_tolerance("bf16", np.array([2.0], np.float32))
    assert low_precision_ulp("fp16", 1.0) == 2.0**-10 and low_precision_ulp("fp16", 1e-9) == 2.0**-24
    with pytest.raises(UserError, match="fp32"):
        default_tolerance("fp32", np.ones(2, np.float32))


def _round(precision: str | None):
    dtype = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, None: np.float32}[precision]
    return lambda x: np.asarray(x, np.float32).astype(dtype).astype(np.float32)


def _mnist_like_logits(precision: str | None) -> np.ndarray:
    """A LeNet-like CNN (conv5x5-relu-pool x2, dense) on ten blob images, every tensor rounded to ``precision``."""
    r, rng = _round(precision), np.random.default_rng(0)
    w1, b1 = r(rng.normal(0, 0.28, (8, 1, 5, 5))), r(rng.normal(0, 0.1, 8))
    w2, b2 = r(rng.normal(0, 0.1, (16, 8, 5, 5))), r(rng.normal(0, 0.1, 16))
    w3, b3 = r(rng.normal(0, 0.15, (784, 10))), r(rng.normal(0, 0.1, 10))
    yy, xx = np.mgrid[0:28, 0:28]
    x = r(np.stack([np.exp(-((yy - 10 - d) ** 2 + (xx - 8 - 2 * d) ** 2) / (20 + d)) for d in range(10)])[:, None])

    def block(h: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        windows = sliding_window_view(np.pad(h, ((0, 0), (0, 0), (2, 2), (2, 2))), (5, 5), axis=(2, 3))
        h = r(r(np.einsum("nchwij,ocij->nohw", windows, w, dtype=np.float32)) + b[None, :, None, None])
        n, c, hh, ww = h.shape
        return np.maximum(h, 0).reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))

    h = block(block(x, w1, b1), w2, b2)
    return r(r(h.reshape(10, -1) @ w3) + b3)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_defaults_pass_a_sound_conversion_and_fail_broken_ones(precision: str) -> None:
    golden = {"logits": _mnist_like_logits(None)}
    tolerances = TolerancePolicy().tolerances_for(precision=precision, goldens=[golden])

    def passes(obtained: np.ndarray) -> bool:
        return compare_iterations([{"logits": obtained}], [golden], tolerances=tolerances, default=Tolerance()).passed

    converted = _mnist_like_logits(precision)
    assert not np.array_equal(converted, golden["logits"])  # rounding really happened
    assert passes(converted)
    assert not passes(golden["logits"] * 1.1)  # a 10% error
    overflowed = converted.copy()
    overflowed[3, 4] = np.inf
    assert not passes(overflowed)


def test_configured_overrides_apply_field_by_field_in_precedence_order() -> None:
    policy = parse_tolerance_policy(
        {
            "fp16": {"rtol": 0.01, "outputs": {"y": {"mode": "median"}}},
            "y": {"atol": 0.5, "rtol": 0.02},
            "bf16": {"top_k": 1},
        },
        where="pyproject [tool.castguard.tolerances]",
    )
    golden = np.array([1.0, 2.0], np.float32)
    default = default_tolerance("fp16", golden)
    assert policy.tolerance_for(precision="fp16", output="z", golden=golden) == Tolerance(atol=default.atol, rtol=0.01)
    assert policy.tolerance_for(precision="fp16", output="y", golden=golden) == Tolerance(
        atol=0.5, rtol=0.02, mode="median"
    )
    assert policy.tolerance_for(precision="bf16", output="z", golden=golden).top_k == 1


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"y": {"atl": 0.1}}, "unknown tolerance field"),
        ({"y": {"atol": "big"}}, "wrong type"),
        ({"y": {"mode": "average"}}, "mode"),
        ({"fp16": {"outputs": {"y": 3}}}, "not a table"),
        ({"y": 0.1}, "not a table"),
    ],
)
def test_bad_tolerance_config_is_a_user_error(table: dict, problem: str) -> None:
    with pytest.raises(UserError, match=problem) as err:
        parse_tolerance_policy(table, where="pyproject [tool.castguard.tolerances]")
    assert "tool.castguard.tolerances" in str(err.value)


def test_tolerances_scale_over_all_iterations() -> None:
    goldens = [{"y": np.array([1.0], np.float32)}, {"y": np.array([100.0], np.float32)}]
    tolerances = TolerancePolicy().tolerances_for(precision="fp16", goldens=goldens)
    assert tolerances["y"] == default_tolerance("fp16", np.array([100.0], np.float32))
