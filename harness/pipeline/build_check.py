"""The sweep's TensorRT build check: whether it runs, and its results cached by converted model. No pytest here.

``trt_build_check`` (``--trt-build-check`` / ``--no-trt-build-check``, ``[tool.castguard] trt_build_check``):

* not set (the default): on when a TensorRT module is installed (``tensorrt``, or TensorRT-RTX from
  ``pip install "castguard[trt]"``), off otherwise. A user who installed TensorRT wants to know whether the
  converted models build; one who did not pays nothing (about 0.1-0.5 s per distinct converted model, once:
  results are cached);
* ``true``: on, and an error naming the install line when no TensorRT module is installed;
* ``false``: off.

Every distinct converted model is built once (:func:`harness.runners.tensorrt.typed_build.check_build` in a child
process); the result is cached under ``trt-build/`` in the content cache, keyed by the converted model's digest,
the optimization profile, the TensorRT release and castguard's build-check code, so a re-run builds nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from harness.core.errors import RunnerUnavailable, UserError
from harness.data.feeds import input_specs
from harness.data.keys import content_key
from harness.pipeline.cache import ContentCache
from harness.pipeline.dedup import model_digest
from harness.runners.tensorrt.buildfacts import TrtBuild
from harness.runners.tensorrt.library import INSTALL_LINE, installed_backend, installed_module

OPTION = "--trt-build-check"
Shape = tuple[int, ...]


def build_check_enabled(setting: bool | None, *, where: str = OPTION) -> bool:
    """Whether this run checks TensorRT builds (see the module docstring); UserError when asked for without TensorRT."""
    installed = installed_module() is not None
    if setting is None:
        return installed
    if setting and not installed:
        raise UserError(
            where=where,
            problem="the TensorRT build check needs TensorRT, and neither tensorrt nor "
            "tensorrt_rtx_bindings is installed",
            fix=f"{INSTALL_LINE} (TensorRT-RTX: builds on any machine, no GPU needed), or drop "
            f"{OPTION} / set trt_build_check = false",
        )
    return setting


def _code_digest() -> str:
    from harness.runners.tensorrt.typed_build import BUILD_SCRIPT

    digest = hashlib.sha256()
    for path in (BUILD_SCRIPT, *(BUILD_SCRIPT.with_name(name) for name in ("typed_build.py", "buildfacts.py"))):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cached_build(
    model: onnx.ModelProto, *, model_dir: Path | None, feed_shapes: Sequence[Mapping[str, Shape]], cache: ContentCache
) -> tuple[TrtBuild | None, str]:
    """The model's build check (from the cache when it was built before) and ``""``, or why there is no result
    (TensorRT installed but not loadable: ``CaseRecord.trt_build_skipped``). A crashed build is not cached: the next run tries again.
    The build machinery is imported here: a run without the build check never loads it."""
    from harness.runners.tensorrt.typed_build import build_from_dict, build_to_dict, check_build, profile_shapes

    profile = profile_shapes(input_specs(model), feed_shapes)
    key = content_key(
        "trt-build",
        cache.fingerprint,
        _code_digest(),
        installed_backend() or "",
        model_digest(model),
        repr(sorted(profile.items())),
    )

    made: list[TrtBuild] = []

    def make() -> dict[str, Any] | None:
        made.append(check_build(model, model_dir=model_dir, feed_shapes=feed_shapes))
        return None if made[0].outcome == "crash" else build_to_dict(made[0])

    try:
        data, _hit = cache.json_entry("trt-build", key, make)
    except RunnerUnavailable as err:
        return None, str(err)
    if data is None:  # a crash, reported but not kept
        return made[0], ""
    try:
        return build_from_dict(data), ""
    except ValueError as err:
        raise UserError(
            where=cache.root / "trt-build" / f"{key}.json",
            problem=f"unreadable cache entry ({err})",
            fix=f"delete the cache folder {cache.root}; castguard rebuilds it",
        ) from err
