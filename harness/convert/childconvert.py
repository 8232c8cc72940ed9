"""Running a converter in a child process (the one child mechanism, :mod:`harness.core.child`).

The parent writes the calibration feeds to an ``.npz`` and sends the converter's entry-point target
(``module:attr``), the FP32 model's path and the case's options as JSON; the child imports the converter, converts,
and saves the model (external data beside it) into the parent's temporary folder. A converter that crashes, hangs
past the time-out or raises is one :class:`~harness.core.errors.ConversionError` for its case (a
:class:`~harness.core.errors.RunnerUnavailable` raised in the child stays a skip with its reason).

Run as a script it is the child side.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.convert.options import ConvertOptions
from harness.convert.plugins import ConvertRequest
from harness.core.child import ChildFailed, read_request, run_child, write_answer
from harness.core.errors import ConversionError, RunnerUnavailable, UserError

TIMEOUT_S = 1800.0


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def options_to_json(options: ConvertOptions) -> dict[str, Any]:
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def options_from_json(data: Mapping[str, Any]) -> ConvertOptions:
    return ConvertOptions(**{k: _tuples(v) for k, v in data.items()})


def convert_in_child(
    target: str, request: ConvertRequest, *, name: str, timeout_s: float = TIMEOUT_S
) -> onnx.ModelProto:
    """Convert with the converter ``target`` (``module:attr``) in a child process; the converted model."""
    with tempfile.TemporaryDirectory(prefix="castguard-convert-") as tmp:
        calibration = ""
        if request.calibration:
            calibration = str(Path(tmp) / "calibration.npz")
            np.savez(calibration, **dict(request.calibration[0]))  # type: ignore[arg-type]
        out = Path(tmp) / "converted.onnx"
        message = {
            "target": target,
            "model_path": str(request.model_path),
            "out_path": str(out),
            "options": options_to_json(request.options),
            "converter_options": dict(request.converter_options),
            "calibration": calibration,
        }
        try:
            answer = run_child(Path(__file__), message, what=f"converter {name}", timeout_s=timeout_s).answer
        except ChildFailed as err:
            raise ConversionError(
                where=f"converter {name} ({target})",
                step="convert",
                problem=f"its process failed: {err.reason}"
                + (f"; stderr ends: {err.stderr[-600:]}" if err.stderr else ""),
                fix=f"report it to the converter's authors, or drop --converter {name}",
            ) from None
        if answer.get("unavailable"):
            raise RunnerUnavailable(str(answer["unavailable"]))
        if answer.get("error"):
            raise ConversionError(
                where=f"converter {name} ({target})",
                step="convert",
                problem=str(answer["error"]),
                fix=f"see the converter's message; report it to its authors, or drop --converter {name}",
            )
        return onnx.load(str(out))  # external data read now, before the folder goes


def _child_request(data: Mapping[str, Any]) -> ConvertRequest:
    calibration: Sequence[Mapping[str, np.ndarray]] = ()
    if data["calibration"]:
        with np.load(data["calibration"]) as npz:
            calibration = ({k: npz[k] for k in npz.files},)
    model_path = Path(data["model_path"])
    return ConvertRequest(
        model=onnx.load(str(model_path)),
        model_path=model_path,
        options=options_from_json(data["options"]),
        calibration=calibration,
        converter_options=data["converter_options"],
        calibration_file=Path(data["calibration"]) if data["calibration"] else None,
    )


def _child_main() -> None:
    data = read_request()
    module, _, attr = str(data["target"]).partition(":")
    try:
        plugin = importlib.import_module(module)
        for part in attr.split("."):
            plugin = getattr(plugin, part)
        result = plugin(_child_request(data))  # type: ignore[operator]
        model = result if isinstance(result, onnx.ModelProto) else result.model
        onnx.save(model, data["out_path"], save_as_external_data=model.ByteSize() > 1 << 30)
    except RunnerUnavailable as err:
        write_answer({"unavailable": str(err)})
        return
    except UserError as err:
        write_answer({"error": str(err)})
        return
    except Exception as err:  # noqa: BLE001 - someone else's converter: any failure is that case's error
        tail = "".join(traceback.format_exception(type(err), err, err.__traceback__)[-3:])
        write_answer({"error": f"{type(err).__name__}: {err} ({tail.strip()[-800:]})"})
        return
    write_answer({"ok": True})


if __name__ == "__main__":
    _child_main()
    sys.exit(0)
