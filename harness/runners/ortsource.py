"""What onnxruntime loads for an in-memory model (:func:`session_source`, :func:`host_source`), and numpy arrays
as OrtValues (:func:`to_ort_value`): the memory a session costs is decided here.

onnxruntime copies the weights it is handed as arrays (external initializers, measured with 1.32: a session of a
model with 64 MB of weights grew the process by 128 MB, the arrays and onnxruntime's copy), so a session in host
memory gets big in-memory weights from a file written to a scratch folder instead (:func:`host_source`, which
:func:`harness.runners.ort.create_session` calls for host providers; onnxruntime then holds its one copy), and a
GPU session gets them as arrays (the host copy goes once they are on the device)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from harness.core.dtypes import BFLOAT16
from harness.core.errors import RunnerError
from harness.data.onnxfile import (
    EXTERNAL_DATA_ABOVE,
    has_pending_casts,
    is_lazy,
    weights_size,
)
from harness.data.onnxsave import save_for_session, save_model
from harness.data.protocopy import split_weights

LOG = logging.getLogger("harness.runners")

SHARED_WEIGHTS_ABOVE = 1 << 20
"""In-memory weights above this many bytes go to onnxruntime as arrays, not serialized (:func:`session_source`): a
4x256 decoder's emulation session (29 MB of weights) is made in 0.07-0.15 s instead of 0.13-0.26 s, and runs as
fast."""


def session_source(
    model: onnx.ModelProto,
    *,
    model_dir: Path | None,
    scratch: Path,
    options: Any | None,
    keep: list[Any] | None = None,
) -> str | bytes:
    """What onnxruntime loads, never a serialized multi-GB proto:

    * a model with pending casts (a converted or emulating lazy model): written to ``scratch`` as an external-data
      model, whose path is returned;
    * with ``options`` and ``keep``, in-memory weights above :data:`SHARED_WEIGHTS_ABOVE`: the graph's bytes, the
      big tensors handed to onnxruntime as arrays (:func:`harness.data.protocopy.split_weights`, external
      initializers: serializing 660 MB of weights took 5 s); ``keep`` gets their OrtValues, which must live as long
      as the session. A session in host memory gets such a model as a file instead (:func:`host_source`);
    * otherwise, in-memory weights above :data:`EXTERNAL_DATA_ABOVE`: written to ``scratch`` likewise;
    * a lazy model (weights on disk in ``model_dir``): its graph's bytes, with onnxruntime told to read the
      weights from ``model_dir`` through ``options`` (nothing is copied; without ``options`` the caller does);
    * anything else: its bytes.
    """
    lazy = is_lazy(model)  # pending casts only ride on external tensors; taken before the split, whose stubs it adds
    if lazy and has_pending_casts(model):
        save_model(model, scratch / "model.onnx", base_dir=model_dir, external_above=0)
        return str(scratch / "model.onnx")
    if options is not None and keep is not None and weights_size(model) > SHARED_WEIGHTS_ABOVE:
        light, values = split_weights(model)
        if values:
            shared = [to_ort_value(value) for value in values.values()]
            options.add_external_initializers(list(values), shared)
            keep.extend(shared)
            model = light
    if not lazy and weights_size(model) > EXTERNAL_DATA_ABOVE:
        save_model(model, scratch / "model.onnx", base_dir=model_dir, external_above=0)
        return str(scratch / "model.onnx")
    if lazy:
        if model_dir is None:
            raise RunnerError("the model's weights are external (a lazily loaded model) but no model_dir was given")
        if options is not None:
            options.add_session_config_entry(
                "session.model_external_initializers_file_folder_path", str(Path(model_dir).resolve())
            )
    return bytes(model.SerializeToString())


def session_scratch() -> tempfile.TemporaryDirectory[str]:
    """The private folder a session's files live in until the session is made (:func:`host_source`,
    :func:`session_source`); left in place where the system will not let it go (Windows keeps a file onnxruntime
    mapped) rather than failing the session."""
    return tempfile.TemporaryDirectory(prefix="castguard-session-", ignore_cleanup_errors=True)


def host_source(
    model: onnx.ModelProto, scratch: Path, *, values: Mapping[str, onnx.TensorProto] | None = None
) -> onnx.ModelProto | Path:
    """What to hand :func:`harness.runners.ort.create_session` for a session in host memory of ``model`` that its caller made for it
    alone: ``model`` written to ``scratch`` (in-memory weights above :data:`SHARED_WEIGHTS_ABOVE`, or ``values``:
    the values of initializers ``model`` has without them), so that the proto can go before onnxruntime loads the
    file (a 6x384 decoder's emulation proto held the fp16 and the widened weights while onnxruntime read its
    copy); otherwise ``model`` itself. ``scratch`` must outlive the session's creation."""
    if not values and (is_lazy(model) or weights_size(model) <= SHARED_WEIGHTS_ABOVE):
        return model
    try:
        return save_for_session(model, scratch, values=values)
    except OSError as err:  # a full temporary folder: the weights as arrays, at twice their memory
        LOG.warning("onnxruntime gets the weights as arrays: %s could not hold them (%s)", scratch, err)
        if not values:
            return model
        whole = onnx.ModelProto()
        whole.CopyFrom(model)
        for init in whole.graph.initializer:
            if init.name in values:
                init.CopyFrom(values[init.name])
        return whole


def to_ort_value(arr: np.ndarray) -> Any:
    """``arr`` as an OrtValue over its own memory (bf16 as uint16 bits typed BFLOAT16)."""
    import onnxruntime as ort

    if arr.dtype == BFLOAT16:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(arr).view(np.uint16), TensorProto.BFLOAT16
        )
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr))
