"""Issue 23, items 2, 4 and 7 end to end with pytester, on models built here: what castguard says about a run is
true. A NaN golden is said when written and never called irreproducible; an onnxruntime failure while making a
golden is one message and the run still reports (and its report says it failed, and the older report never passes
for it); what can be checked before running is a usage error; a runner asked for by name that only skipped fails
the run unless --allow-skipped-runner."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import Run
from tests.helpers.graphs import make_model, mlp_model, save

pytest_plugins = ["pytester"]

ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")


SUITE_ARGS = ("-rs", *ONE_CASE)  # the options of most runs here


def _log_model() -> object:
    """y = log(x) + x*x: NaN wherever x < 0 (inputs default to [-1, 1])."""
    return make_model(
        [
            helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
            helper.make_node("Log", ["x"], ["l"], name="log"),
            helper.make_node("Add", ["l", "sq"], ["y"], name="add"),
        ],
        [("x", TensorProto.FLOAT, [2, 8])],
        [("y", TensorProto.FLOAT, [2, 8])],
    )


def _mask_model() -> object:
    """y = x + mask with separately named dynamic lengths: a mask of the wrong length fails inside onnxruntime."""
    return make_model(
        [helper.make_node("Add", ["x", "mask"], ["y"], name="add_mask")],
        [("x", TensorProto.FLOAT, [1, "s"]), ("mask", TensorProto.FLOAT, [1, "m"])],
        [("y", TensorProto.FLOAT, [1, "s"])],
    )


def _embedding_model(*, batch: int | str = "b") -> object:
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    return make_model(
        [
            helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
            helper.make_node("Relu", ["e"], ["y"], name="relu"),
        ],
        [("ids", TensorProto.INT64, [batch, 6])],
        [("y", TensorProto.FLOAT, [batch, 6, 4])],
        initializers=[table],
    )


def test_a_nan_golden_is_said_when_written_and_never_called_irreproducible(
    pytester: pytest.Pytester, castguard_in: Run
) -> None:
    save(_log_model(), pytester.path / "logm.onnx")
    first = castguard_in(pytester, *SUITE_ARGS, "--model", "logm.onnx")
    first.assert_outcomes(passed=1, failed=1)
    first.stdout.fnmatch_lines(
        [
            "*golden written*",
            "*WARNING: this golden is not finite*",
            "*output 'y': * of 16 values are not finite (* NaN)*",
            "*first produced by node 'log' (Log): its output 'l' has * of 16 values not finite*",
            "*inputs used: *x float32[[]2x8[]]: uniform in [[]-1, 1[]]*",
            "*likely fix:*--val-range 'x:[[]LO,HI[]]' --update-goldens*",
        ]
    )
    second = castguard_in(pytester, *SUITE_ARGS, "--model", "logm.onnx")
    second.assert_outcomes(passed=2)  # NaN where the golden is NaN is equal: nothing changed
    assert "no longer reproduces" not in second.stdout.str()


def test_a_finite_golden_gets_no_warning(pytester: pytest.Pytester, castguard_in: Run) -> None:
    save(mlp_model(), pytester.path / "mlp.onnx")
    assert "not finite" not in castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx").stdout.str()


def test_an_onnxruntime_failure_is_one_message_and_the_run_still_reports(
    pytester: pytest.Pytester, castguard_in: Run
) -> None:
    save(mlp_model(), pytester.path / "mlp.onnx")
    castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx")
    green = castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx")
    green.assert_outcomes(passed=2)
    top = pytester.path / "castguard-report" / "report.md"
    assert "1 case: 1 pass" in top.read_text()
    save(_mask_model(), pytester.path / "mask.onnx")
    result = castguard_in(
        pytester, *SUITE_ARGS, "--model", "mask.onnx", "--input-shapes", "x:1x8,mask:1x5", "--data-max", "512,inf"
    )
    result.assert_outcomes(failed=1, skipped=2)
    out = result.stdout.str()
    assert result.ret == 1 and "Traceback" not in out and len(out.splitlines()) < 40
    assert out.count("onnxruntime (CPU, FP32) failed while making the golden of 'mask'") == 1
    result.stdout.fnmatch_lines(
        [
            "*inputs used: x float32[[]1x8[]] values in [[]*; mask float32[[]1x5[]] values in [[]*",
            "*fix: give inputs this model accepts*--input-shapes*pytest --model mask.onnx --input-shapes x:1x8,mask:1x5",
            "*castguard: 2 cases: 2 skip; report: castguard-report/report.md*",
        ]
    )
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1 and skipped[0].startswith("SKIPPED [2] ") and "no golden for 'mask'" in skipped[0]
    published = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    text = top.read_text()  # this run's report, saying it failed; not the green one
    assert [c["model"] for c in published["cases"]] == ["mask", "mask"]
    assert "**This run FAILED (exit status 1)" in text and "2 case(s) skipped: no golden for 'mask'" in text
    cases_only = castguard_in(
        pytester, *SUITE_ARGS, "-k", "low_precision", "--model", "mask.onnx", "--input-shapes", "x:1x8,mask:1x5"
    )
    cases_only.assert_outcomes(skipped=1)  # the golden test deselected: the skips still do not pass
    assert cases_only.ret == 1


def test_a_stopped_run_never_leaves_an_older_report_passing_for_it(
    pytester: pytest.Pytester, castguard_in: Run
) -> None:
    save(mlp_model(), pytester.path / "mlp.onnx")
    castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx")
    castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx").assert_outcomes(passed=2)
    save(_mask_model(), pytester.path / "mask.onnx")
    stopped = castguard_in(pytester, *SUITE_ARGS, "-x", "--model", "mask.onnx", "--input-shapes", "x:1x8,mask:1x5")
    assert stopped.ret == 1
    run_ids = sorted(p.name for p in (pytester.path / "castguard-report" / "runs").iterdir())
    top = (pytester.path / "castguard-report" / "report.md").read_text()
    assert f"The latest run, `{run_ids[-1]}`" in top and "did not complete" in top
    assert f"runs/{run_ids[-1]}/report.md" in top
    golden_only = castguard_in(
        pytester, *SUITE_ARGS, "-k", "fp32_golden", "--model", "mask.onnx", "--input-shapes", "x:1x8,mask:1x5"
    )
    assert golden_only.ret == 1  # no case ran at all: the older report still says it is not this run
    run_ids = sorted(p.name for p in (pytester.path / "castguard-report" / "runs").iterdir())
    top = (pytester.path / "castguard-report" / "report.md").read_text()
    assert f"The latest run, `{run_ids[-1]}`" in top and "failed (exit status 1) before any case ran" in top


@pytest.mark.parametrize(
    ("args", "message", "fix"),
    [
        (
            ["--val-range", "ids:[0,50]"],
            "input 'ids' holds the indices of Gather 'embed', whose table has 10 rows",
            "--val-range ids:[0,9]",
        ),
        (
            ["--input-shapes", "ids:0x6"],
            "0 given for the dynamic dim 0 ('b') of input 'ids'",
            "give the sizes you deploy with, at least 1, e.g. --input-shapes ids:1x6",
        ),
    ],
)
def test_what_can_be_checked_before_running_is_a_usage_error(
    pytester: pytest.Pytester, args: list[str], message: str, fix: str, castguard_in: Run
) -> None:
    save(_embedding_model(), pytester.path / "emb.onnx")
    result = castguard_in(pytester, *SUITE_ARGS, "--model", "emb.onnx", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert message in err and f"fix: {fix}" in err and "emb.onnx" in err
    assert "Traceback" not in err + result.stdout.str()
    assert not (pytester.path / "goldens").exists()  # refused before anything ran


def test_a_models_own_zero_size_dimension_stays_valid(pytester: pytest.Pytester, castguard_in: Run) -> None:
    save(_embedding_model(batch=0), pytester.path / "empty.onnx")
    castguard_in(pytester, *SUITE_ARGS, "--model", "empty.onnx", "--val-range", "ids:[0,9]").assert_outcomes(
        passed=1, failed=1
    )
    castguard_in(pytester, *SUITE_ARGS, "--model", "empty.onnx", "--val-range", "ids:[0,9]").assert_outcomes(passed=2)


def test_a_requested_runner_that_only_skipped_fails_the_run(pytester: pytest.Pytester, castguard_in: Run) -> None:
    save(mlp_model(), pytester.path / "mlp.onnx")
    castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx")
    result = castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx", "--runner", "ort-cuda")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 1
    said = [line for line in result.stdout.lines if "every case of the requested runner 'ort-cuda' skipped" in line]
    assert len(said) == 1 and "CUDAExecutionProvider" in said[0]
    result.stdout.fnmatch_lines(["*fix: *--allow-skipped-runner*"])
    accepted = castguard_in(
        pytester, *SUITE_ARGS, "--model", "mlp.onnx", "--runner", "ort-cuda", "--allow-skipped-runner"
    )
    accepted.assert_outcomes(passed=1, skipped=1)
    assert accepted.ret == 0 and "requested runner" not in accepted.stdout.str()
    default = castguard_in(pytester, *SUITE_ARGS, "--model", "mlp.onnx")  # the default runner is not "asked for"
    assert default.ret == 0
