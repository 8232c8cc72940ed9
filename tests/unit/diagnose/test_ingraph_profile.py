"""The divergence profile computed inside onnxruntime (side by side) gives the answers of the marked-outputs way,
and covers integer tensors: TopK's indices that flip in fp16 are the cause, not the Gather that reads them."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.diagnose import sidebyside
from harness.diagnose.cause import fix_region
from harness.diagnose.failure import cause_of
from harness.diagnose.pair import tensor_sizes
from harness.diagnose.profile import ModelPair, Profile, divergence_profile, marked_profile, tensor_types
from harness.diagnose.sidebyside import COUNTS, FIGURES, Gate, read_figures, side_by_side
from harness.diagnose.sidemerge import LOW
from harness.judge.paired import judge_outputs
from harness.judge.tolerances import TolerancePolicy
from harness.report.diagnosis import diagnosis_lines
from harness.runners import make_runner
from harness.runners.ort import CPU, create_session, run_session
from harness.runners.ortsource import host_source
from test_models import MODELS
from tests.helpers.diagnosis import diagnose
from tests.helpers.graphs import make_model
from tests.helpers.llama import llama_feeds, llama_model

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _both(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]], options: ConvertOptions, where: Path | None):
    magnitudes = collect_magnitudes(model, feeds=feeds) if math.isfinite(options.data_max) else None
    converted = convert(model, options=options, magnitudes=magnitudes).model
    pair = ModelPair(
        model, converted, feeds, precision=options.low_precision_type, policy=TolerancePolicy(), model_dir=where
    )
    return divergence_profile(pair), marked_profile(pair)


def _assert_same(model: onnx.ModelProto, new: Profile, old: Profile) -> None:
    rows = {r.tensor: r for r in new.rows}
    for before in old.rows:  # every float tensor the marked way judged, judged alike
        after = rows[before.tensor]
        assert after.passed == before.passed, before.tensor
        assert after.computed == before.computed
        assert after.error == pytest.approx(before.error, rel=1e-5, abs=1e-12) or (
            math.isinf(after.error) and math.isinf(before.error)
        ), before.tensor
        assert new.stats[before.tensor] == pytest.approx(old.stats[before.tensor], rel=1e-5, abs=1e-12, nan_ok=True)
        assert new.fp32_absmax[before.tensor] == pytest.approx(old.fp32_absmax[before.tensor], rel=1e-7)
    assert cause_of(model, new) == cause_of(model, old)


@pytest.mark.parametrize("name", ["llama_tiny", "bert_tiny"])
@pytest.mark.parametrize("data_max", [math.inf, 512.0])
def test_bundled_exports_profile_as_the_marked_outputs_did(name: str, data_max: float) -> None:
    path = MODELS[name].path
    model = onnx.load(path)
    feeds = [dict(np.load(path.parent / "inputs.npz"))]
    new, old = _both(model, feeds, ConvertOptions(data_max=data_max), path.parent)
    _assert_same(model, new, old)
    assert len(new.rows) >= len(old.rows)


def test_a_failing_rmsnorm_gets_the_same_cause_and_fix_region_both_ways() -> None:
    model = llama_model()
    feeds = llama_feeds()
    new, old = _both(model, feeds, ConvertOptions(data_max=math.inf), None)
    _assert_same(model, new, old)
    cause = cause_of(model, new)
    assert cause is not None and cause.node
    assert fix_region(model.graph, new, cause.node, precision="fp16") == fix_region(
        model.graph, old, cause.node, precision="fp16"
    )
    assert not all(r.passed for r in new.rows)


def _llama_side_by_side() -> tuple[onnx.ModelProto, dict[str, int], list[str], dict[str, Gate], ModelPair]:
    """The llama test model, its fp16 conversion as a pair, and every float tensor gated at rtol 1e-3."""
    model = llama_model()
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    types = tensor_types(model)
    names = [o for n in model.graph.node for o in n.output if types.get(o) == F32]
    gates = dict.fromkeys(names, Gate(1e-3, True, True))
    return (
        model,
        types,
        names,
        gates,
        ModelPair(model, converted, llama_feeds(), precision="fp16", policy=TolerancePolicy()),
    )


def test_only_one_small_vector_leaves_onnxruntime() -> None:
    model, types, names, gates, pair = _llama_side_by_side()
    merged, plan = side_by_side(pair, names, types=types, gates=gates)
    assert [o.name for o in merged.graph.output] == [plan.figures]
    (vector,) = make_runner("ort", merged).run(llama_feeds()).outputs[0].values()
    assert vector.shape == ((FIGURES + COUNTS) * len(plan.compared),)
    assert sorted(plan.measured) == sorted(names)  # every tensor has figures: compared, or sharing a row


def test_a_graph_for_the_host_holds_neither_half_s_weights_and_gives_the_same_figures(tmp_path: Path) -> None:
    """For a session in host memory the side-by-side model leaves both halves' big weights out (the FP32 model's
    own tensors, the emulated conversion's widened ones) and they are written beside the graph for onnxruntime:
    the merged model never holds a copy of both (a 6x384 decoder at 1x512: the failing case's peak 489 -> 406 MB).
    The figures equal those of the model that holds them."""
    model, types, names, gates, pair = _llama_side_by_side()
    whole, plan = side_by_side(pair, names, types=types, gates=gates)
    values: dict[str, onnx.TensorProto] = {}
    light, light_plan = side_by_side(pair, names, types=types, gates=gates, values=values)
    big = {init.name for init in model.graph.initializer if init.raw_data and len(init.raw_data) > 1024}
    assert big and big <= set(values) and {LOW + name for name in big} <= set(values)
    assert all(not init.raw_data for init in light.graph.initializer if init.name in values)
    options = {"providers": (CPU,), "runner": "test", "as_given": True}
    light_session = create_session(host_source(light, tmp_path, values=values), **options)  # type: ignore[arg-type]
    whole_session = create_session(whole, **options)  # type: ignore[arg-type]
    for feed in llama_feeds():
        got = run_session(light_session, feed, runner="test")[light_plan.figures]
        assert np.array_equal(got, run_session(whole_session, feed, runner="test")[plan.figures], equal_nan=True)


def test_a_tensor_that_only_moves_another_s_values_shares_its_row_and_the_profile_is_unchanged() -> None:
    """q/k/v reshapes and transposes are not compared again; the rows equal those of comparing them, and with a cast
    between the two (another precision), the tensor is compared on its own."""
    model, types, names, gates, pair = _llama_side_by_side()
    _, plan = side_by_side(pair, names, types=types, gates=gates)
    assert plan.aliases
    shared = make_runner("ort", side_by_side(pair, names, types=types, gates=gates)[0]).run(llama_feeds()).outputs[0]
    rows = read_figures(shared, plan)
    alone = {name: Gate(1e-3, True, True, careful=False) for name in names}
    for name, source in plan.aliases:  # compared alone, each gives the row it was given
        solo_model, solo_plan = side_by_side(pair, [name], types=types, gates=alone)
        assert solo_plan.compared == (name,)
        solo = read_figures(make_runner("ort", solo_model).run(llama_feeds()).outputs[0], solo_plan)[name]
        assert np.array_equal(solo[1], rows[name][1]) and rows[name][1] is rows[source][1]
        assert solo[0][:5] == pytest.approx(rows[name][0][:5], rel=1e-6), name
    fp32_transposes = convert(
        model, options=ConvertOptions(data_max=math.inf, op_types_to_exclude=("Transpose",)), magnitudes=None
    ).model  # each Transpose reads a Cast to FP32 of its input in the conversion: its values are not the input's
    _, apart = side_by_side(dataclasses.replace(pair, converted=fp32_transposes), names, types=types, gates=gates)
    transposed = {o for n in model.graph.node if n.op_type == "Transpose" for o in n.output}
    assert transposed and transposed <= set(apart.compared) and not transposed & {n for n, _ in apart.aliases}


def topk_head(n: int = 20) -> onnx.ModelProto:
    """scores = x * 1 -> TopK(k=n) -> indices -> Gather(table, indices): near-tied scores swap order in fp16."""
    table = numpy_helper.from_array((np.arange(n, dtype=np.float32) * 10.0), "table")
    nodes = [
        helper.make_node("Mul", ["x", "one"], ["scores"], name="score"),
        helper.make_node("TopK", ["scores", "k"], ["values", "indices"], name="topk", axis=-1),
        helper.make_node("Gather", ["table", "indices"], ["picked"], name="gather"),
        helper.make_node("Add", ["picked", "zero"], ["y"], name="out"),
    ]
    inits = [
        table,
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array([n], np.int64), "k"),
    ]
    return make_model(nodes, [("x", F32, [1, n])], [("y", F32, [1, n])], initializers=inits)


def test_topk_indices_that_flip_in_fp16_are_the_cause_not_the_gather(tmp_path: Path) -> None:
    n = 20
    scores = np.linspace(1.0, 2.0, n, dtype=np.float32)
    scores[[3, 8, 13]] = scores[[2, 7, 12]] + np.float32(1e-4)  # three near-ties that fp16 rounds to ties
    feeds = [{"x": scores.reshape(1, n)}]
    model = topk_head(n)
    found, _, _ = diagnose(model, feeds, ConvertOptions(data_max=math.inf), tmp_path)
    assert found.cause is not None
    assert (found.cause.node, found.cause.op, found.cause.tensor) == ("topk", "TopK", "indices")
    assert found.cause.differing is not None and 0 < found.cause.differing <= 2 * 3
    assert found.cause.elements == n
    row = next(r for r in found.profile if r.tensor == "indices")
    assert not row.passed and row.differing == found.cause.differing
    text = "\n".join(diagnosis_lines(found, precision="fp16"))
    assert f"TopK indices 'indices' from node 'topk' differ at {found.cause.differing} of {n} positions" in text
    assert "gather" not in (found.fix_nodes or ("gather",))


def test_large_tensors_compared_a_slice_at_a_time_give_the_whole_tensors_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The llama's tensors, compared in slices of 37 elements (sizes from the golden's magnitudes run), give the
    rows, figures and cause of the comparison of whole tensors."""
    model, feeds = llama_model(), llama_feeds()
    options = ConvertOptions(data_max=math.inf)
    converted = convert(model, options=options, magnitudes=None).model
    sizes = tensor_sizes(collect_magnitudes(model, feeds=feeds).shapes, feeds)
    whole = ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy())
    sliced = ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy(), sizes=sizes)
    expected = divergence_profile(whole)
    monkeypatch.setattr(sidebyside, "SLICE", 37)
    types = tensor_types(model)
    names = [o for n in model.graph.node for o in n.output if types.get(o) == F32]
    _, plan = side_by_side(sliced, names, types=types, gates=dict.fromkeys(names, Gate(1e-3, True, True)))
    assert max(plan.rows) > 1 and len(plan.rows) == len(plan.compared)  # the test needs slices
    got = divergence_profile(sliced)
    assert got.rows == expected.rows and got.stats == expected.stats and got.fp32_absmax == expected.fp32_absmax
    assert cause_of(model, got) == cause_of(model, expected) is not None


def test_a_graph_for_a_gpu_compares_in_larger_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the side-by-side graph runs on a GPU (the case's CUDA provider first), a tensor is sliced by
    DEVICE_SLICE, not SLICE: the same tensors, fewer rows and nodes."""
    model, feeds = llama_model(), llama_feeds()
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    sizes = tensor_sizes(collect_magnitudes(model, feeds=feeds).shapes, feeds)
    monkeypatch.setattr(sidebyside, "SLICE", 37)
    monkeypatch.setattr(sidebyside, "DEVICE_SLICE", 10**6)
    types = tensor_types(model)
    names = [o for n in model.graph.node for o in n.output if types.get(o) == F32]
    gates = dict.fromkeys(names, Gate(1e-3, True, True))
    pair = ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy(), sizes=sizes)
    cpu_graph, on_cpu = side_by_side(pair, names, types=types, gates=gates)
    on_gpu_pair = replace(pair, providers=("CUDAExecutionProvider", "CPUExecutionProvider"))
    gpu_graph, on_gpu = side_by_side(on_gpu_pair, names, types=types, gates=gates)
    assert on_cpu.compared == on_gpu.compared and max(on_cpu.rows) > 1 and on_gpu.rows == ()
    assert len(gpu_graph.graph.node) < len(cpu_graph.graph.node)


def test_sizes_are_known_only_when_every_feed_has_the_same_shapes() -> None:
    feeds = llama_feeds()
    shapes = collect_magnitudes(llama_model(), feeds=feeds).shapes
    assert tensor_sizes(shapes, feeds)["logits"] == int(np.prod(shapes["logits"]))
    other = {k: v[..., :-1] if v.ndim > 1 else v for k, v in feeds[0].items()}
    assert tensor_sizes(shapes, [feeds[0], other]) == {}


def test_the_case_s_own_outputs_judge_the_graph_outputs_whose_nodes_leave_the_side_by_side_graph() -> None:
    """With the case's own outputs and goldens, the graph outputs' rows are the case's verdict on them, the LM head
    and logits leave both halves of the side-by-side graph, every other row is as before, and the outputs are read
    once."""
    model, feeds = llama_model(), llama_feeds()
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    goldens = make_runner("ort", model).run(feeds).outputs
    obtained = make_runner("emulate", converted).run(feeds).outputs
    reads: list[int] = []

    def read() -> list[dict[str, np.ndarray]]:
        reads.append(1)
        return obtained

    plain = ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy())
    with_case = ModelPair(
        model, converted, feeds, precision="fp16", policy=TolerancePolicy(), goldens=goldens, obtained=read
    )
    expected, got = divergence_profile(plain), divergence_profile(with_case)
    outputs = {o.name for o in model.graph.output}
    assert outputs == {"logits"} and reads == [1]
    assert [r for r in got.rows if r.tensor not in outputs] == [r for r in expected.rows if r.tensor not in outputs]
    verdict = judge_outputs(obtained, goldens, precision="fp16", policy=TolerancePolicy())
    judged = divergence_profile(dataclasses.replace(with_case, verdict=verdict))  # the case's verdict holds the rows
    assert reads == [1] and judged.rows == got.rows and judged.stats == got.stats  # and nothing is read again
    assert judged.fp32_absmax == got.fp32_absmax
    for out in verdict.outputs:
        row = got.row(out.name)
        assert row is not None and row.passed == out.passed is False
        assert got.stats[out.name] == (out.max_abs, out.max_rel)
        assert got.fp32_absmax[out.name] == float(np.abs(goldens[0][out.name]).max())
    assert cause_of(model, got) == cause_of(model, expected) is not None
    types = tensor_types(model)
    inside = [o for n in model.graph.node for o in n.output if types.get(o) == F32 and o not in outputs]
    merged, _ = side_by_side(with_case, inside, types=types, gates=dict.fromkeys(inside, Gate(1e-3, True, True)))
    made = {o for n in merged.graph.node for o in n.output}
    head = next(n for n in model.graph.node if "logits" in n.output)
    assert not {o for o in head.output} & made and not {LOW + o for o in head.output} & made
    everything = [*inside, "logits"]
    whole, _ = side_by_side(plain, everything, types=types, gates=dict.fromkeys(everything, Gate(1e-3, True, True)))
    assert {o for o in head.output} <= {o for n in whole.graph.node for o in n.output}  # compared: kept
