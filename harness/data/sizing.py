"""How castguard sizes dynamic dims nobody gave: the shared-name rule, ``dim_param`` expressions, the batch
default and castguard convert's default (with a memory cap). :func:`harness.data.shapes.resolve_shapes` is the
entry point; this module holds the rule.

Dims that share a ``dim_param`` share a size; a ``dim_param`` that is arithmetic on other names (``past_sequence
+ sequence``, as exporters write a KV-cache mask, or ``2*s0``) is computed from them, so linked inputs agree.
A dim with no ``dim_param`` is sized on its own. The leading dim of an input of rank >= 2 is the batch.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.core.errors import UserError
from harness.data.feeds import InputSpec, fmt_dims

__all__ = [
    "BATCH_DEFAULT",
    "DYNAMIC_DEFAULT",
    "MAX_DEFAULT_ELEMENTS",
    "DefaultedDim",
    "ShapePlan",
    "Sizer",
    "dim_expression",
]

BATCH_DEFAULT = 1
"""Size of a leading dynamic dim (rank >= 2) without --input-shapes: the batch a deployment runs by default.
Stated in the plan on every run; every other dynamic dim must be given (castguard convert: see DYNAMIC_DEFAULT)."""
DYNAMIC_DEFAULT = 128
"""castguard convert's size for any other dynamic dim nobody gave (sequence, past sequence, image sides...).
Its reference data only feeds the magnitude rules, so it converts where the harness refuses; a sequence of 1
would hide attention's and reductions' sums, 128 is a short real sequence. AutoCast uses 1 for every dim."""
MAX_DEFAULT_ELEMENTS = 1 << 20
"""Defaulted dims are halved (never below 1) while one input would hold more elements than this."""


@dataclass(frozen=True)
class DefaultedDim:
    """A dynamic dim castguard sized because nobody did: the batch default or the converter's default."""

    input: str
    axis: int
    param: str
    size: int
    batch: bool

    def label(self) -> str:
        return f"dim {self.axis} ({self.param!r})" if self.param else f"dim {self.axis} (unnamed)"


@dataclass(frozen=True)
class ShapePlan:
    """The concrete shape of every input, the plan's notes on chosen dims, and the dims castguard defaulted."""

    shapes: dict[str, tuple[int, ...]]
    notes: tuple[str, ...]
    defaulted: tuple[DefaultedDim, ...] = ()


_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}


def _arithmetic(tree: ast.expr) -> bool:
    if isinstance(tree, ast.BinOp):
        return type(tree.op) in _OPS and _arithmetic(tree.left) and _arithmetic(tree.right)
    if isinstance(tree, ast.UnaryOp):
        return isinstance(tree.op, ast.USub) and _arithmetic(tree.operand)
    return isinstance(tree, ast.Name) or (isinstance(tree, ast.Constant) and type(tree.value) is int)


def dim_expression(param: str) -> ast.expr | None:
    """A ``dim_param`` that is arithmetic on other dim names (``past_sequence + sequence``, ``2*s0``): its parsed
    form; None for a plain name (``sequence``, ``unk__3``) or anything else."""
    if not param or param.isidentifier():
        return None
    try:
        tree = ast.parse(param, mode="eval").body
    except SyntaxError:
        return None
    return tree if _arithmetic(tree) and _symbols(tree) else None


def _symbols(tree: ast.expr) -> list[str]:
    return list(dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)))


def _evaluate(tree: ast.expr, sizes: Mapping[str, int]) -> int:
    if isinstance(tree, ast.BinOp):
        return _OPS[type(tree.op)](_evaluate(tree.left, sizes), _evaluate(tree.right, sizes))
    if isinstance(tree, ast.UnaryOp):
        return -_evaluate(tree.operand, sizes)
    return sizes[tree.id] if isinstance(tree, ast.Name) else int(tree.value)  # type: ignore[attr-defined]


Slot = int | str | ast.expr
"""One dim of an input's layout: a static size, a size key (a dim_param, or ``input[axis]`` when unnamed), or
an expression of dim_params."""


class Sizer:
    """Sizes every dynamic dim by key, in input order: given (``--input-shapes``), batch, default or missing."""

    def __init__(
        self,
        specs: Sequence[InputSpec],
        given: Mapping[str, tuple[int, ...]],
        *,
        where: str,
        dynamic_default: int | None,
    ) -> None:
        self.specs, self.given, self.default = specs, given, dynamic_default
        self.sizes: dict[str, int] = {}
        self.source: dict[str, str] = {}  # key -> "--input-shapes NAME" | "batch" | "default" | "missing"
        self.users: dict[str, list[tuple[InputSpec, int]]] = {}
        self.layout: dict[str, list[Slot]] = {}
        self.missing: list[tuple[InputSpec, int]] = []
        for spec in specs:
            if spec.name in given:
                self._bind_given(spec, given[spec.name], where=where)
        self.leading = {
            s.dim_params[0]
            for s in specs
            if s.name not in given
            and s.dims is not None
            and len(s.dims) >= 2
            and s.dims[0] is None
            and s.dim_params
            and s.dim_params[0]
        }
        for spec in specs:
            if spec.name not in given:
                self._lay_out(spec, where=where)

    def _bind_given(self, spec: InputSpec, shape: tuple[int, ...], *, where: str) -> None:
        if spec.dims is not None and (
            len(shape) != len(spec.dims) or any(d is not None and d != s for d, s in zip(spec.dims, shape))
        ):
            raise UserError(
                where="--input-shapes",
                problem=f"{spec.name}:{list(shape)} does not fit the declared shape {fmt_dims(spec.dims)} of {where}",
                fix="keep the rank and the static dimensions; set only the dynamic ones",
            )
        for axis, param in enumerate(spec.dim_params):
            if not param or spec.dims is None or spec.dims[axis] is not None or dim_expression(param) is not None:
                continue
            if param in self.sizes and self.sizes[param] != shape[axis]:
                raise UserError(
                    where="--input-shapes",
                    problem=f"dim {param!r} is {self.sizes[param]} in "
                    f"{self.source[param][len('--input-shapes ') :]} but {shape[axis]} in {spec.name}",
                    fix=f"give every input the same size for {param!r}",
                )
            self.sizes.setdefault(param, shape[axis])
            self.source.setdefault(param, f"--input-shapes {spec.name}")

    def _lay_out(self, spec: InputSpec, *, where: str) -> None:
        if spec.dims is None:
            raise UserError(
                where=where,
                problem=f"input {spec.name!r} has no declared shape",
                fix=f"pass --input-shapes {spec.name}:1x3x224x224 (its real shape)",
            )
        slots: list[Slot] = []
        for axis, dim in enumerate(spec.dims):
            param = spec.dim_params[axis] if axis < len(spec.dim_params) else ""
            expression = dim_expression(param)
            if dim is not None:
                slots.append(dim)
            elif expression is not None:
                for symbol in _symbols(expression):
                    self._size(symbol, spec, axis, leading=symbol in self.leading)
                slots.append(expression)
            else:
                key = param or f"{spec.name}[{axis}]"
                self._size(key, spec, axis, leading=(axis == 0 and len(spec.dims) >= 2) or key in self.leading)
                self.users.setdefault(key, []).append((spec, axis))
                slots.append(key)
        self.layout[spec.name] = slots

    def _size(self, key: str, spec: InputSpec, axis: int, *, leading: bool) -> None:
        if key in self.sizes:
            if self.source[key] == "missing":
                self.missing.append((spec, axis))
            return
        if leading:
            self.sizes[key], self.source[key] = BATCH_DEFAULT, "batch"
        elif self.default is not None:
            self.sizes[key], self.source[key] = self.default, "default"
        else:
            self.sizes[key], self.source[key] = -1, "missing"
            self.missing.append((spec, axis))

    def _dim(self, slot: Slot) -> int:
        if isinstance(slot, int):
            return slot
        if isinstance(slot, str):
            return self.sizes[slot]
        if any(self.sizes[s] < 0 for s in _symbols(slot)):
            return -1
        return max(_evaluate(slot, self.sizes), 0)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {
            s.name: self.given[s.name] if s.name in self.given else tuple(self._dim(d) for d in self.layout[s.name])
            for s in self.specs
        }

    def _keys(self, name: str) -> set[str]:
        keys: set[str] = set()
        for slot in self.layout.get(name, []):
            keys.update([slot] if isinstance(slot, str) else _symbols(slot) if isinstance(slot, ast.expr) else [])
        return keys

    def cap(self) -> None:
        """Halve defaulted sizes while an input that uses them is larger than MAX_DEFAULT_ELEMENTS."""
        while True:
            shrink = {
                key
                for name, shape in self.shapes().items()
                if math.prod(shape) > MAX_DEFAULT_ELEMENTS
                for key in self._keys(name)
                if self.source[key] == "default" and self.sizes[key] > 1
            }
            if not shrink:
                return
            for key in shrink:
                self.sizes[key] //= 2

    def _label(self, spec: InputSpec, axis: int) -> str:
        return f"{spec.name} {spec.dim_name(axis)}"

    def notes(self) -> list[str]:
        notes: list[str] = []
        for key, users in self.users.items():
            spec, axis = users[0]
            if self.source[key] == "batch":
                notes.append(
                    f"{self._label(spec, axis)} is dynamic: set to {BATCH_DEFAULT} (castguard's batch "
                    "default; --input-shapes to change)"
                )
            elif self.source[key] == "default":
                notes.append(
                    f"{self._label(spec, axis)} is dynamic: set to {self.sizes[key]} (castguard convert's "
                    "default for a dim nobody sized; --input_shapes to change)"
                )
        for spec in self.specs:
            for axis, slot in enumerate(self.layout.get(spec.name, [])):
                if isinstance(slot, ast.expr):
                    notes.append(
                        f"{self._label(spec, axis)} = {self._dim(slot)}, computed from "
                        + ", ".join(f"{s} = {self.sizes[s]}" for s in _symbols(slot))
                    )
        for key, users in self.users.items():
            if self.source[key].startswith("--input-shapes"):
                names = ", ".join(dict.fromkeys(s.name for s, _ in users))
                notes.append(f"dim {key!r} of {names} = {self.sizes[key]}, as in {self.source[key]}")
        return notes

    def defaulted(self) -> list[DefaultedDim]:
        found: list[DefaultedDim] = []
        for spec in self.specs:
            for axis, slot in enumerate(self.layout.get(spec.name, [])):
                keys = [slot] if isinstance(slot, str) else _symbols(slot) if isinstance(slot, ast.expr) else []
                chosen = [k for k in keys if self.source[k] in ("batch", "default")]
                if chosen:
                    found.append(
                        DefaultedDim(
                            input=spec.name,
                            axis=axis,
                            param=spec.dim_params[axis] if axis < len(spec.dim_params) else "",
                            size=self._dim(slot),
                            batch=all(self.source[k] == "batch" for k in chosen),
                        )
                    )
        return found
