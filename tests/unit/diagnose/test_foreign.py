"""Another converter's failing output (issue 30): the first-divergence search says which FP32 nodes it could not
follow and names no cause past them; a fused fp16 op it cannot emulate is said, not guessed."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.diagnose.foreign import diagnose_foreign, unfollowed
from harness.diagnose.profile import ModelPair
from harness.judge.tolerances import TolerancePolicy
from tests.helpers.graphs import cancellation_model, make_model


def _renamed_fp16() -> onnx.ModelProto:
    """The cancellation model in fp16 with its Add's output under another name (as a fusing converter leaves it)."""
    c = numpy_helper.from_array(np.array(256.0, np.float16), "c")
    nodes = [
        helper.make_node("Add", ["x", "c"], ["fused_sum"], name="fused"),
        helper.make_node("Sub", ["fused_sum", "c"], ["y"], name="sub"),
    ]
    return make_model(
        nodes, [("x", TensorProto.FLOAT16, [1, 16])], [("y", TensorProto.FLOAT16, [1, 16])], initializers=[c]
    )


def test_no_cause_is_named_past_a_part_the_search_cannot_follow() -> None:
    reference, converted = cancellation_model(), _renamed_fp16()
    assert unfollowed(reference, converted) == ["add"]
    feeds = [{"x": np.random.default_rng(0).uniform(-0.5, 0.5, (1, 16)).astype(np.float32)}]
    diagnosis = diagnose_foreign(
        ModelPair(reference, converted, feeds, precision="fp16", policy=TolerancePolicy()), converter="candidate"
    )
    assert diagnosis.cause is None  # the error shows at y, but it began in the Add the search cannot see
    assert "could not follow 1 FP32 node(s)" in diagnosis.problem and "(add)" in diagnosis.problem
    assert "first seen at 'y' (Sub)" in diagnosis.problem
    assert not diagnosis.command and not diagnosis.fix_nodes  # castguard's fix is not this converter's


def test_a_fused_fp16_op_is_said_not_guessed() -> None:
    from tests.unit.convert.test_converter_plugins import _fused_fp16_model

    converted = _fused_fp16_model()
    reference = onnx.ModelProto()
    reference.CopyFrom(converted)
    for value in (*reference.graph.input, *reference.graph.output):
        value.type.tensor_type.elem_type = TensorProto.FLOAT
    for init in reference.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    feeds = [{"x": np.ones((1, 2, 8), np.float32), "skip": np.ones((1, 2, 8), np.float32)}]
    diagnosis = diagnose_foreign(
        ModelPair(reference, converted, feeds, precision="fp16", policy=TolerancePolicy()), converter="ort-fp16"
    )
    assert diagnosis.cause is None
    assert "could not run" in diagnosis.problem and "com.microsoft::SkipLayerNormalization" in diagnosis.problem


def test_the_message_names_the_unfollowed_part_and_offers_no_castguard_fix() -> None:
    from harness.report.diagnosis import diagnosis_lines

    feeds = [{"x": np.random.default_rng(0).uniform(-0.5, 0.5, (1, 16)).astype(np.float32)}]
    diagnosis = diagnose_foreign(
        ModelPair(cancellation_model(), _renamed_fp16(), feeds, precision="fp16", policy=TolerancePolicy()),
        converter="candidate",
    )
    text = "\n".join(diagnosis_lines(diagnosis, precision="fp16"))
    assert "search: the first-divergence search could not follow 1 FP32 node(s)" in text
    assert "cause:" not in text and "castguard runs no fix for candidate's conversion" in text
