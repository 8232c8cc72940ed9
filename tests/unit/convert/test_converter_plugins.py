"""Converter plugins (issue 30): traits decide what is swept, another converter's output is described from its
own types, a crashing converter is one case error, emulate refuses fused com.microsoft ops on fp16."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, convert
from harness.convert.childconvert import convert_in_child
from harness.convert.described import describe_converted
from harness.convert.plugins import ConvertRequest, converter_names, traits_of
from harness.core.errors import ConversionError, RunnerUnavailable
from harness.report.model import CaseRecord
from harness.report.serde import record_from_dict, record_to_dict
from harness.runners.emulate import EmulateRunner
from harness.sweep.grid import SweepPoint, SweepSpec, expand
from tests.helpers.graphs import mlp_model, save


def test_castguards_own_converters_are_registered_with_traits() -> None:
    assert converter_names()[:3] == ("castguard", "ort-fp16", "autocast")
    assert traits_of("ort-fp16").precisions == ("fp16",)
    assert "data_max" not in traits_of("ort-fp16").takes and "data_max" in traits_of("autocast").takes


def test_settings_a_converter_does_not_take_are_not_swept_for_it() -> None:
    spec = SweepSpec(converters=("castguard", "ort-fp16"), data_max=(8.0, 512.0, math.inf), runners=("emulate",))
    cases = expand(spec)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    castguard = [c for c in cases if c.converter == "castguard"]
    ort = [c for c in cases if c.converter == "ort-fp16"]
    assert len(castguard) == 12  # 2 precisions x 3 data_max x 2 exclusion sets
    assert sorted(c.id for c in ort) == [
        "ort-fp16-excl_none-keepio0-emulate",
        "ort-fp16-excl_sensitive-keepio0-emulate",
    ]
    assert all(c.precision == "fp16" and c.data_max == 512.0 for c in ort)  # held at their defaults
    assert ort[0].applied_settings() == ("exclusions", "keep_io_types", "node_precisions")
    assert castguard[0].id == "fp16-dmax8-imax65504-excl_none-keepio0-emulate"  # castguard's ids are unchanged


def test_a_report_without_converter_reads_as_castguard() -> None:
    record = CaseRecord(model="m", model_sha256="ab" * 32, case=SweepPoint(), status="pass", runner="emulate")
    data = record_to_dict(record)
    data["case"].pop("converter")
    data["case"].pop("candidate")
    assert record_from_dict(data).case.converter == "castguard"


def test_described_share_matches_castguards_plan() -> None:
    model = mlp_model()
    options = ConvertOptions(node_precisions=(("fc2", "fp32"),), data_max=math.inf)
    ours = convert(model, options=options, magnitudes=None)
    described = describe_converted(ours.model, input_shapes={"x": (1, 8)})
    assert described.lowp_flop_share == pytest.approx(ours.lowp_flop_share)
    assert 0.0 < described.lowp_flop_share < 1.0
    assert "fc1" in described.low_nodes and "fc2" not in described.low_nodes


def test_a_converter_that_crashes_is_one_conversion_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "crashing_converter.py").write_text(
        textwrap.dedent(
            """
            import os
            from harness.convert.plugins import ConverterTraits

            class Crash:
                traits = ConverterTraits()
                def __call__(self, request):
                    os.abort()

            crash = Crash()
            """
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    path = save(mlp_model(), tmp_path / "mlp.onnx")
    request = ConvertRequest(model=mlp_model(), model_path=path, options=ConvertOptions())
    with pytest.raises(ConversionError) as err:
        convert_in_child("crashing_converter:crash", request, name="crash", timeout_s=120)
    assert "SIGABRT" in str(err.value) and "crash" in str(err.value)


def _fused_fp16_model() -> onnx.ModelProto:
    gamma = numpy_helper.from_array(np.ones(8, np.float16), "gamma")
    beta = numpy_helper.from_array(np.zeros(8, np.float16), "beta")
    node = helper.make_node(
        "SkipLayerNormalization", ["x", "skip", "gamma", "beta"], ["y"], name="sln", domain="com.microsoft"
    )
    graph = helper.make_graph(
        [node],
        "fused",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT16, [1, 2, 8]) for n in ("x", "skip")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 2, 8])],
        [gamma, beta],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def test_emulate_refuses_a_fused_fp16_op_and_says_which() -> None:
    runner = EmulateRunner(_fused_fp16_model())
    feed = {"x": np.ones((1, 2, 8), np.float16), "skip": np.ones((1, 2, 8), np.float16)}
    with pytest.raises(RunnerUnavailable, match=r"com\.microsoft::SkipLayerNormalization.*'sln'"):
        runner.run([feed])


def test_candidate_case_ids_are_readable() -> None:
    assert SweepPoint(converter="candidate", candidate="/x/m16.onnx", runner="ort").id == "candidate-ort"


def test_converters_and_candidates_come_from_options_and_pyproject(tmp_path: Path) -> None:
    from harness.config import HarnessConfig
    from harness.core.errors import UserError

    table = {"candidates": {"bert": "bert.fp16.onnx"}, "sweep": {"converters": ["castguard", "ort-fp16"]}}
    config = HarnessConfig.from_sources(cli={}, table=table, rootdir=tmp_path, invocation_dir=tmp_path)
    assert config.candidates == (("bert", (tmp_path / "bert.fp16.onnx").resolve()),)
    assert config.sweep.converters == ("castguard", "ort-fp16")
    cli = {"castguard_candidates": ["bert=other.onnx"], "castguard_converters": ["autocast"]}
    config = HarnessConfig.from_sources(cli=cli, table=table, rootdir=tmp_path, invocation_dir=tmp_path / "sub")
    assert config.candidates == (("bert", (tmp_path / "sub" / "other.onnx").resolve()),)
    assert config.sweep.converters == ("autocast",)
    with pytest.raises(UserError, match="unknown converter 'nope'"):
        HarnessConfig.from_sources(
            cli={"castguard_converters": ["nope"]}, table={}, rootdir=tmp_path, invocation_dir=tmp_path
        )
    with pytest.raises(UserError, match="is not KEY=FILE"):
        HarnessConfig.from_sources(
            cli={"castguard_candidates": ["just-a-file.onnx"]}, table={}, rootdir=tmp_path, invocation_dir=tmp_path
        )


def test_nightly_compares_each_converter_with_itself() -> None:
    from harness.nightly.comparison import compare_reports
    from harness.nightly.rules import parse_rules
    from harness.report.model import Provenance, Report

    prov = Provenance(castguard="0", onnx="0", onnxruntime="0", numpy="0", python="3", platform="p", hostname="h")

    def record(case: SweepPoint, status: str) -> CaseRecord:
        return CaseRecord(model="m", model_sha256="ab" * 32, case=case, status=status, runner="emulate", inputs_id="i")

    ours, theirs = SweepPoint(), SweepPoint(converter="ort-fp16")
    baseline = Report.build([record(ours, "pass")], created="2026-01-01T00:00:00Z", provenance=prov)
    tonight = Report.build(
        [record(ours, "pass"), record(theirs, "fail")], created="2026-01-02T00:00:00Z", provenance=prov
    )
    verdict = compare_reports(tonight, baseline, rules=parse_rules("status"), source="b.json")
    assert verdict and verdict.new == (("m", theirs.id, "i"),)  # a new converter's case is new, not a regression
    worse = Report.build([record(ours, "pass"), record(theirs, "pass")], created="x", provenance=prov)
    now = Report.build([record(ours, "pass"), record(theirs, "fail")], created="y", provenance=prov)
    regressed = compare_reports(now, worse, rules=parse_rules("status"), source="b.json")
    assert [c.case_id for c in regressed.regressions] == [theirs.id]


def test_a_converters_own_options_reach_its_cases_and_ids(tmp_path: Path) -> None:
    from harness.config import HarnessConfig

    table = {
        "sweep": {
            "converters": ["castguard", "ort-fp16"],
            "converter_options": {"ort-fp16": {"model_type": "bert", "num_heads": 2}},
        }
    }
    config = HarnessConfig.from_sources(cli={}, table=table, rootdir=tmp_path, invocation_dir=tmp_path)
    ort = [c for c in expand(config.sweep) if c.converter == "ort-fp16"]
    assert ort and all(c.converter_options == (("model_type", "bert"), ("num_heads", "2")) for c in ort)
    assert ort[0].id == "ort-fp16-excl_none-keepio0-model_type.bert-num_heads.2-emulate"
    record = CaseRecord(model="m", model_sha256="ab" * 32, case=ort[0], status="pass", runner="emulate")
    assert record_from_dict(record_to_dict(record)).case == ort[0]
    assert all(not c.converter_options for c in expand(config.sweep) if c.converter == "castguard")
