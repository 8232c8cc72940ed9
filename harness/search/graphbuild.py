"""One random graph under construction (:class:`Build`: its pool of tensors, nodes and constants, all drawn through
Hypothesis) and how it becomes a checked model (:func:`assemble`); the op rules that grow it are
:mod:`harness.search.graphgen`'s."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn
from onnx import TensorProto, helper, numpy_helper

Shape = tuple[int, ...]
MAGNITUDES = (1.0, 0.5, 30.0, 1e-3, 1e3, 5e-8, 7e4, 1e-9, 1e6)
"""Constant magnitudes (first = what shrinking prefers): benign, fp16-subnormal/zero, fp16-overflowing."""
NAMINGS = ("unique", "blank", "some_blank")
"""Node names: as built, all empty (the converter must name them), or every other one empty. (Duplicate
names are not generated: onnxruntime refuses such models.)"""


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: Shape


@dataclass
class Build:
    """The mutable state of one graph being drawn (local to one draw, never shared)."""

    draw: DrawFn
    opset: int
    max_dim: int
    max_elements: int
    pool: list[Tensor] = field(default_factory=list)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    count: int = 0
    side: list[Tensor] = field(default_factory=list)
    """Further outputs of multi-output nodes (Split parts, LayerNormalization's Mean/InvStdDev): consumable like
    any pool tensor, drawn as extra graph outputs, or left unused (found as converter crashes on the ONNX node
    tests: a node whose later output is a graph output or unused)."""

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def pick(self, fits: Callable[[Tensor], bool]) -> Tensor:
        return self.draw(st.sampled_from([t for t in self.pool if fits(t)]))

    def fits_size(self, shape: Shape) -> bool:
        return math.prod(shape) <= self.max_elements

    def new_dim(self, rest: Shape) -> int:
        """A new dimension size, at most max_dim and small enough that ``rest`` times it fits."""
        return self.draw(st.integers(1, max(1, min(self.max_dim, self.max_elements // max(1, math.prod(rest))))))

    def node(self, op: str, inputs: Sequence[str], shape: Shape, **attrs: Any) -> Tensor:
        out = Tensor(self.fresh("t"), shape)
        self.nodes.append(helper.make_node(op, list(inputs), [out.name], name=f"{op}_{self.count}", **attrs))
        self.pool.append(out)
        return out

    def multi(self, op: str, inputs: Sequence[str], shapes: Sequence[Shape | None], **attrs: Any) -> list[Tensor]:
        """A node with several outputs (None: that optional output left out, an empty name). The first output is
        returned first; the others join the pool and :attr:`side`."""
        outs = [None if shape is None else Tensor(self.fresh("t"), shape) for shape in shapes]
        self.nodes.append(
            helper.make_node(op, list(inputs), [o.name if o else "" for o in outs], name=f"{op}_{self.count}", **attrs)
        )
        made = [o for o in outs if o is not None]
        self.pool.extend(made)
        self.side.extend(made[1:])
        return made

    def constant(self, shape: Shape, *, values: np.ndarray | None = None) -> str:
        """A float32 constant: random values of a drawn magnitude, as an initializer or a Constant node."""
        if values is None:
            magnitude = self.draw(st.sampled_from(MAGNITUDES), label="constant magnitude")
            seed = self.draw(st.integers(0, 2**32 - 1), label="constant seed")
            rng = np.random.default_rng(seed)
            kind = self.draw(st.sampled_from(("signed", "positive", "fill")))
            raw = {
                "signed": rng.uniform(-1.0, 1.0, shape),
                "positive": rng.uniform(0.1, 1.0, shape),
                "fill": np.ones(shape),
            }[kind]
            values = raw * magnitude
        array = np.asarray(values, dtype=np.float32).reshape(shape)
        name = self.fresh("c")
        if self.draw(st.booleans(), label="as Constant node"):
            self.nodes.append(
                helper.make_node(
                    "Constant",
                    [],
                    [name],
                    name=f"Constant_{self.count}",
                    value=numpy_helper.from_array(array, name + "_value"),
                )
            )
        else:
            self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def ints(self, values: Sequence[int]) -> str:
        name = self.fresh("i")
        self.initializers.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name))
        return name


def name_nodes(nodes: list[onnx.NodeProto], naming: str) -> None:
    """``unique`` keeps the builder's names; ``blank`` clears them; ``some_blank`` clears every other one."""
    for index, node in enumerate(nodes):
        if naming == "blank" or (naming == "some_blank" and index % 2 == 0):
            node.name = ""


def assemble(b: Build, inputs: Sequence[Tensor], outputs: Sequence[Tensor], *, naming: str) -> onnx.ModelProto:
    """The checked model (``onnx.checker`` full check); a failure here is a bug in this generator."""
    name_nodes(b.nodes, naming)
    graph = helper.make_graph(
        b.nodes,
        "generated",
        [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.shape)) for t in inputs],
        [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.shape)) for t in outputs],
        b.initializers,
    )
    opsets = [helper.make_opsetid("", b.opset)]
    model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="castguard-graphgen",
        ir_version=max(8, helper.find_min_ir_version_for(opsets)),
    )
    onnx.checker.check_model(model, full_check=True)
    return model
