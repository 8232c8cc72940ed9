"""Input shapes: ``--input-shapes`` parsing (one parser for ``pytest`` and ``castguard convert``) and the rule
that turns declared dims into concrete ones.

A dynamic dimension never silently becomes 1: ``--input-shapes`` sizes it (dims sharing a ``dim_param`` take the
same size); the one default is :data:`BATCH_DEFAULT` for the leading dim of an input of rank >= 2, stated in the
plan; any other dynamic dim is refused with one error naming every such input, its ``dim_param`` and the fix.
Zero-size dims stay 0.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from harness.data.feeds import INT_TYPES, InputSpec, fmt_dims
from harness.errors import UserError

__all__ = ["BATCH_DEFAULT", "parse_input_shape", "parse_input_shapes", "resolve_shapes"]

_SHAPE_RE = re.compile(r"^(?P<name>.+):(?P<dims>\[[\d,\s]*\]|\d+(?:x\d+)*)$")
_SHAPE_LIST_SPLIT = re.compile(r",(?![^\[]*\])")   # commas outside [...]
BATCH_DEFAULT = 1
"""Size of a leading dynamic dim (rank >= 2) without --input-shapes: the batch a deployment runs by default.
Stated in the plan on every run; every other dynamic dim must be given."""


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:1x3x224x224`` or ``NAME:[1,3,224,224]`` (Polygraphy) -> (name, dims)."""
    match = _SHAPE_RE.match(text.strip())
    if not match:
        raise UserError(where="--input-shapes", problem=f"cannot parse {text!r}",
                        fix="write NAME:1x3x224x224 (or Polygraphy's NAME:[1,3,224,224]); several: "
                            "x:1x3x224x224,mask:1x128")
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
        raise UserError(where="--input-shapes", problem=f"{text!r} names an input twice",
                        fix="give each input's shape once")
    return parsed


def resolve_shapes(specs: Sequence[InputSpec], given_shapes: Sequence[tuple[str, tuple[int, ...]]], *,
                   where: str) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """Concrete shape per input, and what the plan must say about dims castguard chose.

    Declared static dims stay (0 included); ``--input-shapes`` sets whole inputs and, through their ``dim_param``
    names, the same-named dims of other inputs; a leading dynamic dim (rank >= 2) defaults to
    :data:`BATCH_DEFAULT`. Any other dynamic dim: one UserError naming every such input and dim, with the fix.
    """
    names = [s.name for s in specs]
    given = dict(given_shapes)
    for name in given:
        if name not in names:
            raise UserError(where="--input-shapes", problem=f"{where} has no input named {name!r}",
                            fix=f"use one of: {', '.join(names)}")
    bound: dict[str, tuple[int, str]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        if spec.name in given:
            shape = given[spec.name]
            if spec.dims is not None and (len(shape) != len(spec.dims) or any(
                    d is not None and d != s for d, s in zip(spec.dims, shape))):
                raise UserError(where="--input-shapes", problem=f"{spec.name}:{list(shape)} does not fit the "
                                f"declared shape {fmt_dims(spec.dims)} of {where}",
                                fix="keep the rank and the static dimensions; set only the dynamic ones")
            shapes[spec.name] = shape
            for axis, param in enumerate(spec.dim_params):
                if param and spec.dims is not None and spec.dims[axis] is None:
                    if param in bound and bound[param][0] != shape[axis]:
                        raise UserError(where="--input-shapes", problem=f"dim {param!r} is {bound[param][0]} in "
                                        f"{bound[param][1]} but {shape[axis]} in {spec.name}",
                                        fix=f"give every input the same size for {param!r}")
                    bound.setdefault(param, (shape[axis], f"--input-shapes {spec.name}"))
    notes: list[str] = []
    shared: dict[tuple[str, int, str], list[str]] = {}   # (dim_param, size, source) -> inputs that took it
    missing: list[tuple[InputSpec, int]] = []
    for spec in specs:
        if spec.name in shapes:
            continue
        if spec.dims is None:
            raise UserError(where=where, problem=f"input {spec.name!r} has no declared shape",
                            fix=f"pass --input-shapes {spec.name}:1x3x224x224 (its real shape)")
        dims: list[int] = []
        for axis, dim in enumerate(spec.dims):
            param = spec.dim_params[axis] if axis < len(spec.dim_params) else ""
            if dim is not None:
                dims.append(dim)
            elif param and param in bound:
                dims.append(bound[param][0])
                if not bound[param][1].startswith("default"):
                    shared.setdefault((param, *bound[param]), []).append(spec.name)
            elif axis == 0 and len(spec.dims) >= 2:
                dims.append(BATCH_DEFAULT)
                notes.append(f"{spec.name} {spec.dim_name(axis)} is dynamic: set to {BATCH_DEFAULT} (castguard's "
                             "batch default; --input-shapes to change)")
                if param:
                    bound[param] = (BATCH_DEFAULT, "default")
            else:
                missing.append((spec, axis))
                dims.append(-1)
        shapes[spec.name] = tuple(dims)
    if missing:
        raise _refuse_dynamic(missing, shapes, specs, where=where)
    notes += [f"dim {param!r} of {', '.join(dict.fromkeys(users))} = {size}, as in {source}"
              for (param, size, source), users in shared.items()]
    return shapes, notes


def _refuse_dynamic(missing: list[tuple[InputSpec, int]], shapes: dict[str, tuple[int, ...]],
                    specs: Sequence[InputSpec], *, where: str) -> UserError:
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
    return UserError(where=where, problem=f"dynamic dimension(s) castguard will not guess: {dims}",
                     fix=f"give the sizes you deploy with, e.g. --input-shapes {','.join(examples)} (use your real "
                         "sizes; Polygraphy's NAME:[1,128] form works too; inputs that share a dim name take the "
                         "same size)")
