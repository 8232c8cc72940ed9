"""``emulate``: the truthful low-precision CPU oracle.

onnxruntime's CPU provider runs fp16 ops on fp32 kernels and never rounds between adjacent fp16 ops; it has
no bf16 kernels at all (``docs/runtime-facts.md`` §1.1-1.2). But explicit
``Cast(fp32->fp16|bf16) -> Cast(->fp32)`` pairs survive every ORT optimisation level with their rounding and
overflow (§1.3). So :func:`emulation_model` rewrites a mixed-precision model into an all-fp32 model in which
every tensor that was fp16/bf16 is produced in fp32 and immediately rounded through such a pair:

* fp16/bf16 initializers and tensor attributes (Constant, ConstantOfShape) become fp32 (exact widening);
* every node output typed fp16/bf16 (types from onnx shape inference) is renamed, and the old name is
  re-created as ``Cast(to=low) -> Cast(to=FLOAT)`` of it, so each op's result is rounded once, as when a GPU
  stores it, and overflows to inf past the type's max;
* ``Cast(to=low)`` and ``CastLike`` to a low tensor keep their single rounding from the source type;
  dtype-bearing attributes (``dtype``, ``output_dtype`` of EyeLike/Random*/...) are mapped to FLOAT;
* If/Loop/Scan bodies are rewritten the same way, recursively; model-local functions are inlined first;
* graph inputs/outputs are declared fp32 in the emulation model; :class:`EmulateRunner` converts the feeds
  from their declared dtypes (exact) and converts the outputs back, so the model keeps its declared types.

Recurrent ops (LSTM, GRU, RNN) are refused when they run in fp16/bf16: ORT's fp32 kernel would carry their
hidden and cell state in fp32 across every step and emulate could round only the op's outputs, which read
0.38-0.48x the error of ``reference`` (state in the low type every step) on a 50-step LSTM/GRU
(``docs/gpu-fidelity.md``). The
:class:`~harness.core.errors.RunnerError` names the node and the two ways on: ``--runner reference`` (onnx's
evaluator computes them step by step in the low type) or keeping them FP32 (``--exclude-ops``).

Accumulation: MatMul, Gemm, Conv, Einsum and reductions run on ORT's fp32 kernels, i.e. they accumulate in
fp32 and round once at their output. That is the common GPU behaviour (tensor-core GEMM/conv with fp32
accumulation, cuDNN/TensorRT reductions in fp32) and tracks a real H100 within 0.85-1.09x of its error
(``docs/runtime-facts.md`` §2). A kernel that accumulates in fp16 would show more error than emulate does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner
from onnx import AttributeProto, GraphProto, NodeProto, TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from harness.core.dtypes import LOW_TYPES, np_dtype
from harness.core.errors import RunnerError, RunnerUnavailable
from harness.data.feeds import Feed
from harness.data.names import fresh_name
from harness.data.pending import set_pending_cast
from harness.data.protocopy import light_copy, values_left_out
from harness.runners.base import Runner
from harness.runners.ort import CPU, create_session, run_session
from harness.runners.ortsource import host_source, session_scratch

FLOAT = TensorProto.FLOAT
_INT = AttributeProto.INT
_DTYPE_ATTRS = frozenset({"dtype", "output_dtype"})
_SUFFIX_F32 = "__castguard_f32"
_SUFFIX_LOW = "__castguard_low"
RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN"})  # state carried across steps: not emulated (module docstring)


class _Namer:
    """Fresh tensor/node names that do not collide with any name in the model."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.used: set[str] = set()
        for graph in _graphs(model.graph):
            for node in graph.node:
                self.used.add(node.name)
                self.used.update(node.input)
                self.used.update(node.output)
            self.used.update(v.name for v in [*graph.input, *graph.output, *graph.initializer])

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.used)


def _subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def _graphs(graph: GraphProto) -> Iterator[GraphProto]:
    yield graph
    for node in graph.node:
        for sub in _subgraphs(node):
            yield from _graphs(sub)


def _collect_types(model: onnx.ModelProto) -> dict[str, int]:
    types: dict[str, int] = {}
    for graph in _graphs(model.graph):
        for value in [*graph.input, *graph.output, *graph.value_info]:
            if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
                types[value.name] = value.type.tensor_type.elem_type
        for init in graph.initializer:
            types[init.name] = init.data_type
    return types


def _widen_tensor(tensor: TensorProto) -> TensorProto:
    if tensor.data_type not in LOW_TYPES:
        return tensor
    if uses_external_data(tensor):  # a lazy model: widened while its temporary copy is written
        set_pending_cast(tensor, FLOAT)
        return tensor
    wide = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float32), tensor.name)
    wide.doc_string = tensor.doc_string
    return wide


def _map_attributes(node: NodeProto) -> None:
    for attr in node.attribute:
        if attr.type == AttributeProto.TENSOR:
            attr.t.CopyFrom(_widen_tensor(attr.t))
        elif attr.type == AttributeProto.TENSORS:
            for tensor in attr.tensors:
                tensor.CopyFrom(_widen_tensor(tensor))
        elif attr.type == AttributeProto.INT and attr.name in _DTYPE_ATTRS and attr.i in LOW_TYPES:
            attr.i = FLOAT


def _declare_fp32(values: Iterable[onnx.ValueInfoProto]) -> None:
    for value in values:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type in LOW_TYPES:
            value.type.tensor_type.elem_type = FLOAT


def _rounding(src: str, dst: str, low: int, namer: _Namer, *, single: bool = False) -> list[NodeProto]:
    """``src`` (fp32) -> Cast(to=low) -> Cast(to=FLOAT) -> ``dst``; ``single``: ``src`` is already low."""
    nodes = []
    low_name = src
    if not single:
        low_name = namer.fresh(dst + _SUFFIX_LOW)
        nodes.append(_cast(src, low_name, low, name=namer.fresh(dst + "__round")))
    nodes.append(_cast(low_name, dst, FLOAT, name=namer.fresh(dst + "__widen")))
    return nodes


def _cast(src: str, dst: str, to: int, *, name: str) -> NodeProto:
    """``helper.make_node("Cast", [src], [dst], to=to, name=name)``, built directly (the same message, field for
    field: a sweep builds several hundred of them per emulated model, and make_node's generality is most of their
    cost)."""
    return NodeProto(
        op_type="Cast", input=[src], output=[dst], name=name, attribute=[AttributeProto(name="to", type=_INT, i=to)]
    )


def _refuse_low_custom(node: NodeProto, types: dict[str, int]) -> None:
    """A custom-domain node (com.microsoft's fused Attention, SkipLayerNormalization...) on fp16/bf16 tensors:
    a fused kernel rounds inside itself as its implementation chooses, so emulate cannot know where; refused."""
    low = [t for t in (*node.input, *node.output) if t and types.get(t) in LOW_TYPES]
    if low:
        raise RunnerUnavailable(
            f"emulate cannot round {node.domain}::{node.op_type} (node {node.name!r}, fp16/bf16 tensor "
            f"{low[0]!r}): a fused kernel's intermediate precision is its implementation's, so emulating it "
            "would not be truthful; judge this model on a runner that runs the op (--runner ort-cuda or trt "
            "on a GPU), or convert without fusions"
        )


def _rewrite_node(node: NodeProto, types: dict[str, int], namer: _Namer) -> list[NodeProto]:
    for sub in _subgraphs(node):
        _rewrite_graph(sub, types, namer)
    if node.domain not in ("", "ai.onnx"):
        _refuse_low_custom(node, types)
        return [node]
    for out in node.output:
        if out and out not in types:
            raise RunnerError(
                f"emulate: onnx shape inference could not type tensor {out!r} (node {node.name!r}, "
                f"{node.op_type}); emulate needs every tensor's type to know what to round"
            )
    if node.op_type in RECURRENT_OPS and any(types.get(t) in LOW_TYPES for t in [*node.input, *node.output] if t):
        raise RunnerError(
            f"emulate: node {node.name!r} ({node.op_type}) runs in {LOW_TYPES[_low_type(node, types)]}, and emulate "
            "cannot round its recurrent state at every step (it would round only the op's outputs: optimistic); "
            f"fix: use --runner reference for this model, or keep {node.op_type} FP32 "
            f"(--exclude-ops keep_rnn={'+'.join(sorted(RECURRENT_OPS))})"
        )
    if node.op_type in ("Cast", "CastLike") and types.get(node.output[0]) in LOW_TYPES:
        low = types[node.output[0]]
        out = node.output[0]
        low_name = namer.fresh(out + _SUFFIX_LOW)
        cast = helper.make_node("Cast", [node.input[0]], [low_name], to=low, name=node.name or namer.fresh(out))
        cast.attribute.extend(a for a in node.attribute if a.name != "to")
        return [cast, *_rounding(low_name, out, low, namer, single=True)]
    _map_attributes(node)
    if node.op_type == "Constant":
        return [node]
    extra: list[NodeProto] = []
    for index, out in enumerate(node.output):
        if out and types[out] in LOW_TYPES:
            wide = namer.fresh(out + _SUFFIX_F32)
            node.output[index] = wide
            extra += _rounding(wide, out, types[out], namer)
    return [node, *extra]


def _low_type(node: NodeProto, types: dict[str, int]) -> int:
    return next(types[t] for t in [*node.input, *node.output] if t and types.get(t) in LOW_TYPES)


def _rewrite_graph(
    graph: GraphProto, types: dict[str, int], namer: _Namer, *, sources: Mapping[str, TensorProto] | None = None
) -> None:
    """``sources``: the values of initializers copied without them (:func:`harness.data.protocopy.values_left_out`)."""
    for init in graph.initializer:
        init.CopyFrom(_widen_tensor((sources or {}).get(init.name, init)))
    for sparse in graph.sparse_initializer:
        if sparse.values.data_type in LOW_TYPES:
            raise RunnerError(f"emulate: sparse fp16/bf16 initializer {sparse.values.name!r} is not supported")
    _declare_fp32(graph.input)
    _declare_fp32(graph.output)
    new_nodes = [n for node in graph.node for n in _rewrite_node(node, types, namer)]
    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.value_info[:]


def emulation_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The all-fp32 model with per-tensor fp16/bf16 rounding (see the module docstring)."""
    sources: dict[str, TensorProto] = {}
    if model.functions:
        work = onnx.inliner.inline_local_functions(model)
    else:
        # the fp16/bf16 weights are widened straight into the copy, which never holds their bytes as well (a
        # 6x384 decoder's emulation model held 105 MB for 66 MB of weights)
        work, sources = values_left_out(model, lambda tensor: tensor.data_type in LOW_TYPES)
    declared = _collect_types(work)  # before inference: onnx cannot type (or even load) fused custom-domain ops
    for graph in _graphs(work.graph):
        for node in graph.node:
            if node.domain not in ("", "ai.onnx"):
                _refuse_low_custom(node, declared)
    try:
        inferred = onnx.shape_inference.infer_shapes(
            light_copy(work), check_type=False, strict_mode=False, data_prop=True
        )
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as err:
        raise RunnerError(f"emulate: onnx shape inference failed, so tensor types are unknown: {err}") from err
    types = _collect_types(inferred)
    namer = _Namer(work)
    _rewrite_graph(work.graph, types, namer, sources=sources)
    return work


class EmulateRunner(Runner):
    """Runs :func:`emulation_model` on ORT CPU; inputs and outputs keep the model's declared dtypes."""

    def __init__(self, model: onnx.ModelProto, *, model_dir: Path | None = None) -> None:
        super().__init__(model, name="emulate", rounds_low_precision=True, model_dir=model_dir)
        self._out_dtypes = {
            o.name: np_dtype(o.type.tensor_type.elem_type)
            for o in model.graph.output
            if o.type.tensor_type.elem_type in LOW_TYPES
        }
        self._session: object = None

    def activate_impl(self) -> None:
        with session_scratch() as tmp:  # the emulation proto goes first
            self._session = create_session(
                host_source(emulation_model(self.model), Path(tmp)),
                providers=(CPU,),
                runner=self.name,
                model_dir=self.model_dir,
                spinning=False,
            )

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        wide = {
            name: arr.astype(np.float32) if arr.dtype in (np.float16, np_dtype(TensorProto.BFLOAT16)) else arr
            for name, arr in feed.items()
        }
        outputs = run_session(self._session, wide, runner=self.name)
        return {
            name: arr.astype(self._out_dtypes[name]) if name in self._out_dtypes else arr
            for name, arr in outputs.items()
        }

    def deactivate_impl(self) -> None:
        self._session = None
