"""Fewer casts: decisions adjusted after classification so that low-precision islands merge.

Three passes, in this order, on the classifier's decisions (rules 8-10 of :mod:`harness.convert.classify`):

8. Data movement follows its data. A data-movement node (Reshape, Transpose, Squeeze, Unsqueeze, Gather on
   data, Concat, Slice, Split, Flatten, Identity...) that is low only by default takes the precision of the
   tensor it moves: kept FP32 when every float data input comes FP32 from a compute node or the graph. The Cast
   then sits after the move, where the next compute node needs it, and an FP32 -> move -> FP32 path gets no
   Cast pair that cancels (FP32 -> fp16 -> FP32 would also round the data). A move of a constant (e.g. the
   Identity a tied weight gets in torch exports) that only FP32 nodes read stays FP32 with them.
8b. A selection (Where, or a move) held FP32 by init_max whose readers are all low goes low with them
   (:func:`selections_follow_readers`).
9. Small FP32 islands. A connected group of FP32 nodes whose estimated FLOPs are below
   ``fp32_island_min_flops`` costs two Casts for nothing: it becomes low unless a rule requires FP32 for one of
   its nodes (data_max, init_max, schema, target kernels, exclusions, denominators, node_precisions...). The
   user-cast rule holds a small island when the user's Cast really widens (fp16/bf16 -> fp32), and, by default
   (``respect_fp32_casts``), when it is an identity Cast (fp32 -> fp32): the author's ``.float()``. Every small island kept FP32 is logged with the rule that
   requires it.
10. An identity user Cast (to = its input's type in the FP32 model, e.g. ``.to(torch.float32)`` of an fp32
    tensor) whose consumers all end up low carries no intent: it becomes an Identity in the low type.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import onnx
from onnx import TensorProto

from harness.convert.decision import Decision
from harness.convert.graphinfo import GraphInfo, domain_of
from harness.convert.options import ConvertOptions
from harness.core.dtypes import LOW_ELEMS

LOG = logging.getLogger("harness.convert")
DATA_MOVEMENT = frozenset(
    {
        "Reshape",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Gather",
        "GatherElements",
        "GatherND",
        "Concat",
        "Slice",
        "Split",
        "Flatten",
        "Identity",
        "Expand",
        "Tile",
        "DepthToSpace",
        "SpaceToDepth",
    }
)
"""Ops that move or copy values without arithmetic: the same result in any float type."""
USER_CAST = "user cast: input"
SOFT_PREFIXES = (USER_CAST, "data movement:")
"""Reasons that do not require FP32 on their own: they give way inside a small island (rule 9)."""
IDENTITY_CAST = "identity cast"
FlopsOf = Callable[[onnx.NodeProto], int | None]


def _data_inputs(node: onnx.NodeProto) -> list[str]:
    if node.op_type == "Concat":
        return [n for n in node.input if n]
    return [node.input[0]] if node.input and node.input[0] else []


def _source_elem(
    name: str,
    info: GraphInfo,
    nodes: list[onnx.NodeProto],
    decisions: dict[str, Decision],
    storage_in: Callable[[str], int | None],
) -> int | None:
    """The type `name` will have before any Cast: None when it adapts (constants) or is not float."""
    if not info.is_float(name) or name in info.initializers or name in info.constants:
        return None
    producer = info.producers.get(name)
    if producer is None:
        return storage_in(name)
    decision = decisions[nodes[producer].name]
    return decision.elem if decision.elem is not None else info.types[name]


def follow_data(
    nodes: list[onnx.NodeProto],
    info: GraphInfo,
    decisions: dict[str, Decision],
    storage_in: Callable[[str], int | None],
) -> int:
    """Rule 8, in topological order so chains of moves follow their first producer. Returns nodes changed."""
    changed = 0
    for node in nodes:
        decision = decisions[node.name]
        if node.op_type not in DATA_MOVEMENT or domain_of(node) or not decision.is_low or decision.reason:
            continue
        sources = [_source_elem(n, info, nodes, decisions, storage_in) for n in _data_inputs(node)]
        known = [s for s in sources if s is not None]
        if known and all(s not in LOW_ELEMS for s in known):
            high = TensorProto.DOUBLE if all(s == TensorProto.DOUBLE for s in known) else TensorProto.FLOAT
            decisions[node.name] = Decision(high, "data movement: its data comes FP32, the Cast goes after it")
            changed += 1
        elif not known and _read_only_by_high(node, nodes, info, decisions):
            decisions[node.name] = Decision(
                TensorProto.FLOAT, "data movement: moves a constant that only FP32 nodes read"
            )
            changed += 1
    return changed


def _read_only_by_high(
    node: onnx.NodeProto, nodes: list[onnx.NodeProto], info: GraphInfo, decisions: dict[str, Decision]
) -> bool:
    """Every reader of `node`'s float outputs is FP32 (and there is one); graph outputs count as readers."""
    readers = [
        decisions[nodes[i].name]
        for name in node.output
        if name and info.is_float(name)
        for i in info.consumers.get(name, ())
    ]
    outputs = [name for name in node.output if name in info.outputs]
    return bool(readers) and not outputs and all(r.elem is not None and not r.is_low for r in readers)


SELECTION = DATA_MOVEMENT | {"Where"}
"""Ops whose every output element is one of their input elements: rounding commutes with them."""


def selections_follow_readers(nodes: list[onnx.NodeProto], info: GraphInfo, decisions: dict[str, Decision]) -> int:
    """Rule 8b. A selection op (Where, or a move) kept FP32 only because a constant it selects from exceeds
    init_max, and whose readers are all low, goes low too: its readers would get the selected values rounded to
    the low type by the Cast anyway. The constant is stored in the low type, clamped to its largest finite value
    (logged as a clamp) where the Cast would have made it inf; an attention mask's -3.4e38 fill, for one."""
    changed = 0
    for node in nodes:
        decision = decisions[node.name]
        if node.op_type not in SELECTION or domain_of(node) or not decision.reason.startswith("init_max"):
            continue
        readers = [
            decisions[nodes[i].name]
            for name in node.output
            if name and info.is_float(name)
            for i in info.consumers.get(name, ())
        ]
        if readers and not any(name in info.outputs for name in node.output) and all(r.is_low for r in readers):
            low = next(r.elem for r in readers)
            if all(r.elem == low for r in readers) and low is not None:
                decisions[node.name] = Decision(
                    low, f"selection: its low readers round what it selects anyway (was {decision.reason})"
                )
                changed += 1
    return changed


def _high(decision: Decision) -> bool:
    return decision.elem is not None and not decision.is_low


def _islands(nodes: list[onnx.NodeProto], info: GraphInfo, decisions: dict[str, Decision]) -> list[list[int]]:
    """Connected groups of FP32 nodes (linked through float tensors), in node order."""
    parent = list(range(len(nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for index, node in enumerate(nodes):
        if not _high(decisions[node.name]):
            continue
        for name in node.input:
            producer = info.producers.get(name) if name and info.is_float(name) else None
            if producer is not None and _high(decisions[nodes[producer].name]):
                parent[find(index)] = find(producer)
    groups: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        if _high(decisions[node.name]):
            groups.setdefault(find(index), []).append(index)
    return list(groups.values())


def merge_small_islands(
    nodes: list[onnx.NodeProto],
    info: GraphInfo,
    decisions: dict[str, Decision],
    *,
    options: ConvertOptions,
    flops_of: FlopsOf,
) -> int:
    """Rule 9: FP32 islands under ``options.fp32_island_min_flops`` go to ``options``' low type unless a rule
    requires FP32. Returns the number of nodes made low. With ``options.respect_fp32_casts`` a reader of any user
    upcast, an identity one included, holds its island (see ``ConvertOptions.respect_fp32_casts``)."""
    low, min_flops, respect_fp32_casts = options.low_elem, options.fp32_island_min_flops, options.respect_fp32_casts
    if min_flops <= 0:
        return 0
    changed = kept = merged = 0
    for island in _islands(nodes, info, decisions):
        members = [nodes[i] for i in island]
        flops = sum(flops_of(n) or 0 for n in members)
        unknown = any(flops_of(n) is None for n in members)
        if unknown or flops >= min_flops:
            continue
        hard = [
            (n.name, decisions[n.name].reason)
            for n in members
            if not decisions[n.name].reason.startswith(SOFT_PREFIXES)
            or decisions[n.name].elem == TensorProto.DOUBLE
            or (respect_fp32_casts and decisions[n.name].reason.startswith(USER_CAST))
            or _reads_real_upcast(n, nodes, info)
        ]
        if hard:
            kept += 1
            LOG.debug(
                "FP32 island of %d node(s), %d FLOPs (< fp32_island_min_flops %d) kept FP32: the rule %s "
                "requires it for %s",
                len(members),
                flops,
                min_flops,
                (hard[0][1] or "fp32").split(":")[0],
                hard[0][0],
            )
            continue
        merged += 1
        reason = (
            f"fp32 island of {len(members)} node(s), {flops} FLOPs < fp32_island_min_flops {min_flops}: "
            "low precision (no rule requires FP32 here)"
        )
        LOG.debug("%s: %s", ", ".join(n.name for n in members), reason)
        for node in members:
            decisions[node.name] = Decision(low, reason)
            changed += 1
    if kept or merged:
        LOG.info(
            "FP32 islands below fp32_island_min_flops %d: %d made low (no rule required FP32), %d kept FP32 "
            "(a rule requires it; the DEBUG log names the rule per island)",
            min_flops,
            merged,
            kept,
        )
    return changed


def _reads_real_upcast(node: onnx.NodeProto, nodes: list[onnx.NodeProto], info: GraphInfo) -> bool:
    """`node` reads a user Cast that widens (fp16/bf16 -> fp32): the model is already mixed there and the
    user chose fp32 on purpose, so the user-cast rule holds even a small island. Only an identity Cast (fp32 ->
    fp32, exporter plumbing) gives way."""
    for name in node.input:
        producer = info.producers.get(name) if name else None
        cast = nodes[producer] if producer is not None else None
        if cast is None or cast.op_type != "Cast" or domain_of(cast):
            continue
        to = next((a.i for a in cast.attribute if a.name == "to"), None)
        if to is not None and info.types.get(cast.input[0]) != to:
            return True
    return False


def identity_casts(
    nodes: list[onnx.NodeProto], info: GraphInfo, decisions: dict[str, Decision], *, low: int
) -> set[str]:
    """Rule 10: names of identity user Casts to rewrite as Identity nodes in the low type."""
    found: set[str] = set()
    outputs = set(info.outputs)
    for node in nodes:
        if node.op_type != "Cast" or domain_of(node) or not decisions[node.name].reason.startswith("user cast"):
            continue
        to = next((a.i for a in node.attribute if a.name == "to"), None)
        source = node.input[0]
        if to is None or info.types.get(source) != to or not info.is_float(source) or node.output[0] in outputs:
            continue
        producer = info.producers.get(source)
        if producer is None or not decisions[nodes[producer].name].is_low:
            continue
        readers = [nodes[i] for i in info.consumers.get(node.output[0], ())]
        if readers and all(decisions[r.name].is_low for r in readers):
            decisions[node.name] = Decision(
                low,
                f"{IDENTITY_CAST}: Cast to {to} of a tensor already of that type, its consumers are low: an Identity",
            )
            found.add(node.name)
    return found
