"""The model the reference child runs: every node output marked as a graph output, written without
serializing the weights.

A model held in memory has its big initializers written as raw bytes to ``weights.bin`` beside the graph
(external data, page-aligned offsets), so neither a full copy of the model nor a protobuf serialization of its
weights is made: on a 550 MB VGG-19 that was ~2 s of copying and serializing plus a 550 MB protobuf parse in the
child. A lazy model (weights already on disk) keeps its external tensors, which onnxruntime reads from the
model's own folder. The scratch folder is on ``/dev/shm`` (memory) when it has room, else the system temp dir.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import TensorProto, numpy_helper
from onnx.external_data_helper import uses_external_data

from harness.core.dtypes import FLOAT_TYPES, INT_TYPES
from harness.data.protocopy import copy_except, value_bytes

WEIGHTS_FILE = "weights.bin"
ALIGN = 4096
INLINE_BELOW = 1024
_PLAIN = FLOAT_TYPES | INT_TYPES | {TensorProto.UINT64}
"""Element types of a plain tensor (no string, no float8/int4)."""
SHM = Path("/dev/shm")


@dataclass
class ChildModel:
    """The marked graph (big in-memory weights as stubs into ``weights.bin``) and the tensors to write there."""

    model: onnx.ModelProto
    pending: list[tuple[TensorProto, int]] = field(default_factory=list)
    """(source tensor, offset in weights.bin)."""
    size: int = 0

    def write(self, folder: Path) -> Path:
        """Write ``weights.bin`` and ``model.onnx`` into `folder`; returns the model path."""
        if self.pending:
            with open(folder / WEIGHTS_FILE, "wb") as stream:
                for tensor, offset in self.pending:
                    stream.seek(offset)
                    stream.write(tensor.raw_data if tensor.raw_data else numpy_helper.to_array(tensor).tobytes())
        path = folder / "model.onnx"
        path.write_bytes(self.model.SerializeToString())
        return path


def child_model(model: onnx.ModelProto, *, external_ok: bool) -> ChildModel:
    """`model` with every node output marked as a graph output. `external_ok`: in-memory weights above
    INLINE_BELOW bytes become stubs into weights.bin (only for models without external tensors of their own)."""
    marked: onnx.ModelProto = copy_except(model, "graph")
    marked.graph.CopyFrom(copy_except(model.graph, "initializer"))
    present = {o.name for o in marked.graph.output}
    for node in marked.graph.node:
        for name in node.output:
            if name and name not in present:
                marked.graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    result = ChildModel(model=marked)
    for init in model.graph.initializer:
        if (
            not external_ok
            or uses_external_data(init)
            or init.data_type not in _PLAIN
            or (nbytes := value_bytes(init)) < INLINE_BELOW
        ):
            marked.graph.initializer.append(init)
            continue
        offset = -(-result.size // ALIGN) * ALIGN
        stub = marked.graph.initializer.add(
            name=init.name, data_type=init.data_type, dims=init.dims, data_location=TensorProto.EXTERNAL
        )
        stub.external_data.add(key="location", value=WEIGHTS_FILE)
        stub.external_data.add(key="offset", value=str(offset))
        stub.external_data.add(key="length", value=str(nbytes))
        result.pending.append((init, offset))
        result.size = offset + nbytes
    return result


@contextmanager
def scratch_folder(nbytes: int) -> Iterator[Path]:
    """A temporary folder for the child's files: on /dev/shm when it has twice `nbytes` free, else in the
    system temp dir. Removed on exit."""
    parent: str | None = None
    if SHM.is_dir() and os.access(SHM, os.W_OK):
        stats = os.statvfs(SHM)
        if stats.f_bavail * stats.f_frsize > 2 * nbytes + (64 << 20):
            parent = str(SHM)
    folder = Path(tempfile.mkdtemp(prefix="castguard-ref-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
