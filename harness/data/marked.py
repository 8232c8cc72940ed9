"""A copy of a model with extra graph outputs: intermediate tensors marked so that one run returns them (as
Polygraphy's mark-all). Used by the diagnosis's profile and by tune's stress search."""

from __future__ import annotations

from collections.abc import Sequence

import onnx


def with_outputs(model: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph also outputs ``names`` (untyped; the runtime infers their types)."""
    marked = onnx.ModelProto()
    marked.CopyFrom(model)
    present = {o.name for o in marked.graph.output}
    marked.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in present)
    return marked
