"""Byte-stable writers for the bundled artifacts (.onnx, .pgm, .npz).

Every bundled file must come out identical when it is rebuilt: no timestamps,
fixed producer fields, deterministic protobuf serialization.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

PRODUCER_NAME = "castguard.test_models"
PRODUCER_VERSION = "1"


def make_model(graph: onnx.GraphProto, *, opset: int, doc: str) -> onnx.ModelProto:
    """A model with the lowest IR version that supports ``opset`` and fixed producer fields."""
    model = helper.make_model_gen_version(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.producer_name = PRODUCER_NAME
    model.producer_version = PRODUCER_VERSION
    model.doc_string = doc
    return model


def onnx_bytes(model: onnx.ModelProto) -> bytes:
    """Check the model fully (types and shapes) and serialize it deterministically."""
    onnx.checker.check_model(model, full_check=True)
    data: bytes = model.SerializeToString(deterministic=True)
    return data


def npz_bytes(**arrays: np.ndarray) -> bytes:
    """An uncompressed .npz (numpy's zip entries carry the fixed 1980-01-01 date, so this is byte-stable)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # numeric by construction (numpy < 2.2 has no allow_pickle here)
    return buf.getvalue()


def pgm_bytes(image: np.ndarray) -> bytes:
    """A binary (P5) 8-bit greyscale PGM, written by Pillow."""
    from PIL import Image

    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 2:
        raise ValueError(f"a PGM image must be a 2-D uint8 array, got {arr.dtype} with shape {arr.shape}")
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PPM")
    return buf.getvalue()


def read_pgm(path: Path) -> np.ndarray:
    """A PGM file as a 2-D uint8 array (Pillow, as the TensorRT sample reads it)."""
    from PIL import Image

    with Image.open(path) as img:
        return np.array(img)


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path``; return True when the file was created or its bytes changed."""
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return True
