"""Apply the decisions: give every float tensor its storage type and insert Casts where a consumer
needs another type. One Cast per tensor and direction, placed right before its first consumer.

Rules:
- a node's float tensors bound to a schema type variable get the decided type when the variable allows
  it, otherwise their original type (e.g. Resize ``scales``, bf16 ``roi``); fixed-type params never change;
- inputs bound to a *free* type variable (one input, no output: Shape, IsNaN, a crop Resize's ``roi``...) read the
  stored type as it is when the schema allows it, except the first input of a node with float outputs
  (onnx's inference ties RMSNormalization's Y to X although the schema names another variable) and the
  inputs of a node with untyped outputs (a sequence's element type follows SplitToSequence's input), and
  BitCast (its input's bit width must match its output's), and Resize's ``roi`` where the mode ignores it
  (not tf_crop_and_resize): it takes the node's type, as in AutoCast;
- graph inputs/outputs: original types with keep_io_types (or respect_existing_types), else float ones become the low type; an output
  whose producer stores another type is renamed ``<name>_pre_cast`` and a final Cast restores the name;
- fp32_accumulation: a low MatMul/Gemm reads fp32 Casts of its low inputs and writes fp32 that is cast
  down (Cast -> MatMul fp32 -> Cast, the pattern strongly typed TensorRT fuses);
- the user's Casts are never removed or changed; cleanup (:mod:`harness.convert.castcleanup`) only touches Casts
  inserted here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx
from onnx import TensorProto, helper

from harness.convert.castcleanup import cleanup_casts, fold_user_upcasts
from harness.convert.decision import Decision, elem_name
from harness.convert.graphbuilder import graph_names
from harness.convert.graphinfo import GraphInfo, SigCache, Signature, signature
from harness.convert.initializers import apply_storage, choose_storage
from harness.convert.options import ConvertOptions
from harness.convert.subgraphs import captured, rename_captures
from harness.convert.validate import expected_io_type
from harness.core.dtypes import FLOAT_TYPES
from harness.core.errors import ConversionError
from harness.data.names import fresh_name

ANY = -1
ACCUMULATING = frozenset({"MatMul", "Gemm"})


@dataclass
class _State:
    storage: dict[str, int] = field(default_factory=dict)
    cache: dict[tuple[str, int], str] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)
    ours: set[str] = field(default_factory=set)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    clamped: list[str] = field(default_factory=list)


class Rewriter:
    """Rewrites the prepared working copy in place."""

    def __init__(
        self,
        model: onnx.ModelProto,
        info: GraphInfo,
        decisions: dict[str, Decision],
        options: ConvertOptions,
        sig_cache: SigCache,
        exact_ints: frozenset[str] = frozenset(),
    ) -> None:
        self.model, self.info, self.decisions, self.options = model, info, decisions, options
        self.sig_cache = sig_cache
        self.exact_ints = exact_ints
        """Integer tensors the reference run saw within +-2**24 (exact in fp32), for the bf16 user-Cast fold."""
        self.state = _State()
        self.taken = graph_names(model.graph)

    # -- planning ---------------------------------------------------------------------------------
    def _sig(self, node: onnx.NodeProto) -> Signature | None:
        return signature(node, self.info.opsets, self.sig_cache)

    def _target(self, sig: Signature, param: str, decision: Decision, original: int) -> int:
        if not sig.is_var(param):
            return original
        if decision.elem is not None and decision.elem in sig.allowed[param]:
            return decision.elem
        return original

    def wanted_inputs(self, node: onnx.NodeProto) -> list[tuple[int, int] | None]:
        """Per input: None (not float) or (wanted type or ANY, fallback type)."""
        decision, sig = self.decisions[node.name], self._sig(node)
        result: list[tuple[int, int] | None] = []
        float_out = decision.elem is not None and any(n and self.info.is_float(n) for n in node.output)
        untyped_out = any(n and n not in self.info.types for n in node.output)  # sequences, optionals
        for index, name in enumerate(node.input):
            if not name or not self.info.is_float(name):
                result.append(None)
                continue
            original = self.info.types[name]
            if sig is None:
                want = decision.elem if decision.elem is not None else original
                result.append((want, want))
                continue
            param = sig.inputs[index]
            target = self._target(sig, param, decision, original)
            # A free first input of a node with float outputs is its data input: onnx's inference may tie the
            # outputs to it although the schema gives them another variable (RMSNormalization's Y follows X).
            free = (
                sig.is_var(param)
                and sig.inputs.count(param) == 1
                and param not in sig.outputs
                and not (index == 0 and float_out)
                and not untyped_out
                and node.op_type != "BitCast"
                and not ignored_roi(node, index)
            )
            result.append((ANY if free else target, target))
        return result

    def output_types(self, node: onnx.NodeProto) -> list[int | None]:
        decision, sig = self.decisions[node.name], self._sig(node)
        result: list[int | None] = []
        for index, name in enumerate(node.output):
            if not name or not self.info.is_float(name):
                result.append(None)
            elif name in self.info.constants:
                result.append(self.state.storage[name])
            elif sig is None:
                result.append(decision.elem if decision.elem is not None else self.info.types[name])
            else:
                result.append(self._target(sig, sig.outputs[index], decision, self.info.types[name]))
        return result

    def output_wanted(self, name: str) -> int | None:
        original = self.info.types.get(name)
        if original not in FLOAT_TYPES:
            return None
        return expected_io_type(original, keep_io_types=self.options.keeps_io_types, low=self.options.low_elem)

    def _plan_sources(self, wanted: list[list[tuple[int, int] | None]]) -> None:
        sources = {**self.info.initializers, **self.info.constants}
        wants: dict[str, set[int]] = {}
        for node, per_input in zip(self.model.graph.node, wanted):
            for name, want in zip(node.input, per_input):
                if name in sources and want is not None and want[0] != ANY:
                    wants.setdefault(name, set()).add(want[0])
            if self.decisions[node.name].elem is None:
                for name in captured(node):
                    if name in sources and self.info.is_float(name):
                        wants.setdefault(name, set()).add(self.info.types[name])
        for name in self.info.outputs:
            if name in sources and (want_out := self.output_wanted(name)) is not None:
                wants.setdefault(name, set()).add(want_out)
        for name, tensor in sources.items():
            self.state.storage[name] = choose_storage(
                tensor,
                wants.get(name, set()),
                max_bytes=self.options.init_conversion_max_bytes,
                weights=self.info.weights,
            )
        self.state.clamped = apply_storage(self.model, self.info, self.state.storage)

    # -- rewriting --------------------------------------------------------------------------------
    def _unique(self, base: str) -> str:
        return fresh_name(base, self.taken)

    def _cast(self, source: str, to: int) -> str:
        key = (source, to)
        if key not in self.state.cache:
            name = self._unique(f"{source}_cast_to_{elem_name(to)}")
            empty = self.info.initializers.get(source)
            if empty is not None and 0 in empty.dims:
                # an empty placeholder (Resize's roi/scales): a typed empty initializer, so inference still sees
                # it empty (a Cast's output would not be); nothing is duplicated
                self.model.graph.initializer.append(helper.make_tensor(name, to, list(empty.dims), []))
            else:
                self.state.nodes.append(helper.make_node("Cast", [source], [name], name=name, to=to))
                self.state.ours.add(name)
            self.state.storage[name] = to
            self.state.cache[key] = name
        return self.state.cache[key]

    def _stored(self, name: str, node: onnx.NodeProto) -> tuple[str, int]:
        source = self.state.alias.get(name, name)
        if source not in self.state.storage:
            raise ConversionError(
                where="convert",
                step="insert casts",
                node=node.name,
                problem=f"input {name!r} is used before it is produced (graph not sorted?)",
                fix="topologically sort the model (onnx.checker.check_model reports this)",
            )
        return source, self.state.storage[source]

    def _feed_inputs(self, node: onnx.NodeProto, per_input: list[tuple[int, int] | None]) -> None:
        sig = self._sig(node)
        for index, want in enumerate(per_input):
            if want is None:
                continue
            source, have = self._stored(node.input[index], node)
            wanted, fallback = want
            if wanted == ANY:
                wanted = have if sig is not None and sig.allows(sig.inputs[index], have) else fallback
            node.input[index] = source if wanted == have else self._cast(source, wanted)

    def _feed_captures(self, node: onnx.NodeProto) -> None:
        mapping = {}
        for name in captured(node):
            if not self.info.is_float(name):
                continue
            source, have = self._stored(name, node)
            original = self.info.types[name]
            if have != original:
                mapping[name] = self._cast(source, original)
            elif source != name:
                mapping[name] = source
        if mapping:
            rename_captures(node, mapping)

    def _emit_outputs(self, node: onnx.NodeProto, accumulate: bool) -> None:
        outputs = self.output_types(node)
        self.state.nodes.append(node)
        for index, name in enumerate(node.output):
            elem = outputs[index]
            if elem is None:
                continue
            producer, slot = node, index
            if accumulate:
                wide = self._unique(f"{name}_fp32acc")
                node.output[index] = wide
                self.state.storage[wide] = TensorProto.FLOAT
                producer, slot = helper.make_node("Cast", [wide], [name], name=name, to=elem), 0
                self.state.nodes.append(producer)
                self.state.ours.add(name)
            self.state.storage[name] = elem
            want = self.output_wanted(name) if name in self.info.outputs else None
            if want is not None and want != elem:
                pre = self._unique(f"{name}_pre_cast")
                producer.output[slot] = pre
                self.state.storage[pre] = elem
                self.state.alias[name] = pre
                self.state.nodes.append(helper.make_node("Cast", [pre], [name], name=f"{pre}_to_output", to=want))
                self.state.ours.add(f"{pre}_to_output")
                self.state.storage[name] = want
                self.state.cache[(pre, want)] = name

    def run(self) -> _State:
        graph = self.model.graph
        wanted = [self.wanted_inputs(node) for node in graph.node]
        self._plan_sources(wanted)
        for name in self.info.inputs:
            original = self.info.types.get(name)
            if original is not None:
                self.state.storage[name] = (
                    (self.output_wanted(name) or original) if original in FLOAT_TYPES else original
                )
        low_ops = self.options.fp32_accumulation
        for node, per_input in zip(list(graph.node), wanted):
            decision = self.decisions[node.name]
            self._feed_inputs(node, per_input)
            if decision.elem is None:
                self._feed_captures(node)
            accumulate = low_ops and decision.is_low and node.op_type in ACCUMULATING
            if accumulate:
                for index, want in enumerate(per_input):
                    if want is not None:
                        node.input[index] = self._cast(node.input[index], TensorProto.FLOAT)
            self._emit_outputs(node, accumulate)
        del graph.node[:]
        graph.node.extend(self.state.nodes)
        cleanup_casts(graph, self.state.ours, self.state.storage)
        fold_user_upcasts(graph, self.state.ours, self.state.storage, self.info.types, exact_ints=self.exact_ints)
        self._retype_io()
        return self.state

    def _retype_io(self) -> None:
        graph, storage = self.model.graph, self.state.storage
        for vi in graph.input:
            if vi.name in storage and vi.type.tensor_type.elem_type in FLOAT_TYPES:
                vi.type.tensor_type.elem_type = storage[vi.name]
        for vi in graph.output:
            want = self.output_wanted(vi.name)
            if want is not None:
                vi.type.tensor_type.elem_type = want
        for vi in graph.value_info:
            if vi.name in storage and vi.type.tensor_type.elem_type in FLOAT_TYPES:
                vi.type.tensor_type.elem_type = storage[vi.name]


def ignored_roi(node: onnx.NodeProto, index: int) -> bool:
    """Resize's ``roi`` (input 1) where it is ignored: every coordinate_transformation_mode but
    tf_crop_and_resize. It then goes with the node's type, as AutoCast converts it; with tf_crop_and_resize it
    holds crop coordinates, which keep their stored (FP32) type."""
    if node.op_type != "Resize" or index != 1:
        return False
    mode = next((a.s for a in node.attribute if a.name == "coordinate_transformation_mode"), b"half_pixel")
    return mode != b"tf_crop_and_resize"
