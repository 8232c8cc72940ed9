"""Input shapes: ``--input-shapes`` parsing (one parser for ``pytest`` and ``castguard convert``) and the rule
that turns declared dims into concrete ones.

A dynamic dimension never silently becomes 1: ``--input-shapes`` sizes it (dims sharing a ``dim_param`` take the
same size); the harness's one default is :data:`~harness.data.sizing.BATCH_DEFAULT` for the leading dim of an input of rank >= 2,
stated in the plan; any other dynamic dim is refused with one error naming every such input, its ``dim_param``
and the fix. ``castguard convert`` (whose reference data only feeds the magnitude rules) sizes those with
:data:`~harness.data.sizing.DYNAMIC_DEFAULT` instead and says so (:mod:`harness.data.sizing`). Zero-size dims
stay 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import onnx

from harness.core.errors import UserError
from harness.core.memory import check_fits, human
from harness.data.feeds import INT_TYPES, InputSpec
from harness.data.sizing import ShapePlan, Sizer

__all__ = ["UnsizedDims", "parse_input_shape", "parse_input_shapes", "resolve_shapes"]

_SHAPE_RE = re.compile(r"^(?P<name>.+):(?P<dims>\[[\d,\s]*\]|\d+(?:x\d+)*)$")
_SHAPE_LIST_SPLIT = re.compile(r",(?![^\[]*\])")  # commas outside [...]


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:1x3x224x224`` or ``NAME:[1,3,224,224]`` (Polygraphy) -> (name, dims)."""
    match = _SHAPE_RE.match(text.strip())
    if not match:
        raise UserError(
            where="--input-shapes",
            problem=f"cannot parse {text!r}",
            fix="write NAME:1x3x224x224 (or Polygraphy's NAME:[1,3,224,224]); several: x:1x3x224x224,mask:1x128",
        )
    raw = match["dims"].strip("[]")
    parts = [p for p in re.split(r"[x,\s]+", raw) if p]
    return match["name"], tuple(int(p) for p in parts)


def parse_input_shapes(text: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """One option value: a comma list as ``castguard convert --input_shapes`` takes (``x:1x3x224x224,mask:1x128``),
    each item in either form (``x:[1,3,224,224]`` too); repeated names are an error."""
    items = [item.strip() for item in _SHAPE_LIST_SPLIT.split(text.strip()) if item.strip()]
    if not items:
        raise UserError(where="--input-shapes", problem=f"no shape in {text!r}", fix="write NAME:1x3x224x224")
    parsed = tuple(parse_input_shape(item) for item in items)
    names = [name for name, _ in parsed]
    if len(set(names)) != len(names):
        raise UserError(
            where="--input-shapes", problem=f"{text!r} names an input twice", fix="give each input's shape once"
        )
    return parsed


def resolve_shapes(
    specs: Sequence[InputSpec],
    given_shapes: Sequence[tuple[str, tuple[int, ...]]],
    *,
    where: str,
    dynamic_default: int | None = None,
    iterations: int = 1,
) -> ShapePlan:
    """Concrete shape per input, and what the plan must say about dims castguard chose.

    Declared static dims stay (0 included); ``--input-shapes`` sets whole inputs and, through their ``dim_param``
    names, the same-named dims of other inputs; a leading dynamic dim (rank >= 2) defaults to
    :data:`~harness.data.sizing.BATCH_DEFAULT`. Any other dynamic dim takes `dynamic_default` where one is given (castguard convert's
    reference data: :data:`~harness.data.sizing.DYNAMIC_DEFAULT`), else one UserError names every such input and dim, with the fix.
    Dims that share a ``dim_param`` share a size, and a ``dim_param`` that is an expression of other names
    (``past_sequence + sequence``, as exporters write a KV-cache mask) is computed from them. Defaults shrink
    (halving, never below 1) while an input would hold more than :data:`~harness.data.sizing.MAX_DEFAULT_ELEMENTS` elements.
    """
    names = [s.name for s in specs]
    given = dict(given_shapes)
    for name in given:
        if name not in names:
            raise UserError(
                where="--input-shapes",
                problem=f"{where} has no input named {name!r}",
                fix=f"use one of: {', '.join(names)}",
            )
    _refuse_zero_for_dynamic(specs, given, where=where)
    sizer = Sizer(specs, given, where=where, dynamic_default=dynamic_default)
    if sizer.missing:
        raise _refuse_dynamic(sizer.missing, sizer.shapes(), specs, where=where)
    sizer.cap()
    shapes = sizer.shapes()
    _check_memory(specs, shapes, iterations=iterations, where=where)
    return ShapePlan(shapes=shapes, notes=tuple(sizer.notes()), defaulted=tuple(sizer.defaulted()))


FEED_COPIES = 8
"""Feed-sized buffers castguard holds at once: the random draw (float64: two), the feed, the golden's feeds and
outputs, a runner's cast copy, its outputs and intermediates (issue 33.12: a 1x10^9 float input, 4 GB, ran numpy
out of memory on a 23 GB machine)."""


def _check_memory(
    specs: Sequence[InputSpec], shapes: Mapping[str, tuple[int, ...]], *, iterations: int, where: str
) -> None:
    """A usage error, before anything is allocated, when the inputs cannot be held (sizes in bytes)."""
    sizes = {s.name: math.prod(shapes[s.name]) * _itemsize(s.elem_type) for s in specs if s.name in shapes}
    need = sum(sizes.values()) * iterations
    biggest = max(sizes, key=lambda n: sizes[n], default="")
    if not biggest:
        return
    dims = "x".join(map(str, shapes[biggest]))
    check_fits(
        need,
        copies=FEED_COPIES,
        what=f"the inputs ({iterations} iteration(s); the largest, {biggest!r} of shape {dims}, "
        f"is {human(sizes[biggest])})",
        where=where,
        fix="give smaller sizes with --input-shapes NAME:1x128 (or input_shapes in castguard convert), or run "
        "on a machine with more memory",
    )


def _itemsize(elem_type: int) -> int:
    try:
        return int(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return 8  # strings and types numpy cannot hold: count them as wide as the widest number


def _refuse_zero_for_dynamic(specs: Sequence[InputSpec], given: Mapping[str, tuple[int, ...]], *, where: str) -> None:
    """A 0 given for a dynamic dim (a batch of 0) is refused before anything runs; a model's own fixed 0 stays."""
    for spec in specs:
        shape = given.get(spec.name)
        if shape is None or spec.dims is None:
            continue
        zeros = [axis for axis, (declared, size) in enumerate(zip(spec.dims, shape)) if size == 0 and declared is None]
        if zeros:
            dims = ", ".join(spec.dim_name(axis) for axis in zeros)
            example = "x".join(str(1 if axis in zeros else size) for axis, size in enumerate(shape))
            raise UserError(
                where=f"--input-shapes {spec.name}:{'x'.join(map(str, shape))}",
                problem=f"{where}: 0 given for the dynamic {dims} of input {spec.name!r}: a zero-size "
                "input checks nothing (no values to compare) and many ops fail on it",
                fix=f"give the sizes you deploy with, at least 1, e.g. --input-shapes {spec.name}:{example}",
            )


class UnsizedDims(UserError):
    """Dynamic dims that nobody sized and castguard will not guess (the harness, castguard tune)."""


def _refuse_dynamic(
    missing: list[tuple[InputSpec, int]], shapes: dict[str, tuple[int, ...]], specs: Sequence[InputSpec], *, where: str
) -> UnsizedDims:
    """One error for every dynamic dim castguard will not guess, with an --input-shapes example to edit."""
    dims = "; ".join(f"input {spec.name!r} {spec.dim_name(axis)}" for spec, axis in missing)
    examples: list[str] = []
    covered: set[str] = set()
    for spec in specs:
        axes = [axis for s, axis in missing if s is spec]
        params = {spec.dim_params[a] for a in axes if spec.dim_params[a]}
        if not axes or (params and params <= covered and len(params) == len(axes)):
            continue
        covered |= params
        guess = 224 if spec.elem_type not in INT_TYPES and len(spec.dims or ()) == 4 else 128
        example = [guess if d == -1 else d for d in shapes[spec.name]]
        examples.append(f"{spec.name}:{'x'.join(str(d) for d in example)}")
    return UnsizedDims(
        where=where,
        problem=f"dynamic dimension(s) castguard will not guess: {dims}",
        fix=f"give the sizes you deploy with, e.g. --input-shapes {','.join(examples)} (use your real "
        "sizes; Polygraphy's NAME:[1,128] form works too; inputs that share a dim name take the "
        "same size)",
    )
