"""A runner run in a child process with a time-out: a plugin that hangs, segfaults or calls ``os._exit`` fails its
own case, with its last words, and the run goes on (issue 33.10).

:func:`harness.runners.make_runner` wraps every runner plugin in an :class:`IsolatedRunner` unless the plugin
declares ``isolated = False`` (castguard's own runners do: :mod:`harness.runners.builtin`). The proxy is a
:class:`~harness.runners.base.Runner` like any other; its ``run(feeds)`` starts one child through the one child
protocol (:mod:`harness.core.child`), which builds the plugin's runner there (:func:`~harness.runners.registry.build_runner`)
and runs every feed. Arrays travel as ``.npz`` files (never pickled) in a temporary folder; the model as its
serialized bytes (external data stays where ``model_dir`` says, as in-process).

The time-out is the user's (``--runner-timeout`` / ``[tool.castguard] runner_timeout``), else :func:`fit_timeout`:
one measured FP32 forward of the model (the in-process emulate runner, which widens fp16/bf16 to fp32) times
:data:`SLOWDOWN_ALLOWED` per feed, plus :data:`START_S` for the child's start-up and the plugin's own set-up.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.core.child import ChildFailed, read_request, run_child, write_answer
from harness.core.dtypes import BFLOAT16
from harness.core.errors import HarnessError, RunnerError, RunnerUnavailable
from harness.data.feeds import Feed, validate_feeds
from harness.runners.base import Runner, RunnerOptions, RunResult
from harness.runners.registry import build_runner, load_plugin, registered

START_S = 60.0
"""Seconds allowed for the child to start, import the plugin and activate it (on a loaded 2-core machine)."""
SLOWDOWN_ALLOWED = 100.0
"""How many times slower than one measured FP32 forward a plugin may be per feed before it counts as hung."""
_CHILD = "from harness.runners.isolated import child_main; child_main()"


def fit_timeout(model: onnx.ModelProto, feeds: Sequence[Feed], *, model_dir: Path | None) -> float:
    """The default time-out for ``feeds`` on ``model``: :data:`START_S` + :data:`SLOWDOWN_ALLOWED` x one measured
    FP32 forward (emulate, in this process) per feed. A model emulate cannot run gets :data:`START_S` x 5."""
    from harness.runners.emulate import EmulateRunner  # noqa: PLC0415 - only isolated runs need the measure

    if not feeds:
        return START_S
    try:
        with EmulateRunner(model, model_dir=model_dir) as runner:
            start = time.perf_counter()
            runner.infer(feeds[0])
            forward_s = time.perf_counter() - start
    except HarnessError:
        return START_S * 5
    return START_S + SLOWDOWN_ALLOWED * forward_s * len(feeds)


class IsolatedRunner(Runner):
    """Proxies the runner registered as ``name`` into a child process (see the module docstring)."""

    def __init__(
        self,
        model: onnx.ModelProto,
        *,
        name: str,
        rounds_low_precision: bool,
        model_dir: Path | None = None,
        options: RunnerOptions | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(
            model, name=name, rounds_low_precision=rounds_low_precision, model_dir=model_dir, options=options
        )
        self.timeout_s = timeout_s
        self._folder: Path | None = None

    def activate_impl(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="castguard-runner-"))
        (self._folder / "model.onnx").write_bytes(self.model.SerializeToString())

    def deactivate_impl(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        return self._in_child([feed]).outputs[0]

    def run(self, feeds: Sequence[Feed]) -> RunResult:
        """Every feed in one child (activating around them if needed)."""
        if not self.is_active:
            with self:
                return self.run(feeds)
        checked = validate_feeds(list(feeds), self._inputs, where=f"feed for runner {self.name}")
        return self._in_child(checked)

    def _in_child(self, feeds: Sequence[Feed]) -> RunResult:
        assert self._folder is not None
        folder = self._folder
        arrays: dict[str, Any] = {f"{i}/{k}": v for i, feed in enumerate(feeds) for k, v in feed.items()}
        np.savez(folder / "feeds.npz", **arrays)
        timeout_s = (
            self.timeout_s if self.timeout_s is not None else fit_timeout(self.model, feeds, model_dir=self.model_dir)
        )
        request = {
            "name": self.name,
            "folder": str(folder),
            "model_dir": None if self.model_dir is None else str(self.model_dir),
            "options": self.runner_options,
            "feeds": len(feeds),
        }
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # the parent's plugins too
        try:
            answer = run_child(_CHILD, request, what=f"runner {self.name}", timeout_s=timeout_s, env=env).answer
        except ChildFailed as err:
            raise RunnerError(_failure_text(self.name, err)) from None
        if "unavailable" in answer:
            raise RunnerUnavailable(str(answer["unavailable"]))
        if "error" in answer:
            raise RunnerError(str(answer["error"]))
        arrays = _load_npz(folder / "outputs.npz")
        outputs: list[dict[str, np.ndarray]] = [{} for _ in feeds]
        for key, value in arrays.items():
            index, _, out = key.partition("/")
            outputs[int(index)][out] = value
        return RunResult(
            outputs=outputs,
            runner=str(answer["runner"]),
            rounds_low_precision=bool(answer["rounds_low_precision"]),
            seconds=float(answer["seconds"]),
        )


def _failure_text(name: str, err: ChildFailed) -> str:
    """``runner X (in a child process) crashed with SIGSEGV; its last words: ...; fix: ...``."""
    tail = " | ".join(line.strip() for line in err.stderr.strip().splitlines()[-5:] if line.strip())
    what = {
        "timeout": f"gave no answer within {err.timeout_s or 0:g} s (hung?)",
        "signal": f"crashed with {err.signal}",
        "exit": f"exited with status {err.returncode} mid-run",
        "no-answer": "finished without an answer",
        "start": "could not start",
    }[err.kind]
    fix = (
        "raise --runner-timeout SECONDS (or [tool.castguard] runner_timeout) if it is only slow, else fix the runner"
        if err.kind == "timeout"
        else f"fix the runner plugin {name!r} (or report it to its authors)"
    )
    return f"runner {name} (in a child process) {what}; its last words: {tail or '(nothing on stderr)'}; fix: {fix}"


def child_main() -> None:
    """The child's side: build the plugin's runner in this process, run the feeds, answer."""
    request = read_request()
    folder = Path(request["folder"])
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    arrays = _load_npz(folder / "feeds.npz")
    feeds: list[Feed] = [{} for _ in range(int(request["feeds"]))]
    for key, value in arrays.items():
        index, _, name = key.partition("/")
        feeds[int(index)][name] = value
    model_dir = None if request["model_dir"] is None else Path(request["model_dir"])
    try:
        plugin = load_plugin(registered()[request["name"]])
        runner = build_runner(request["name"], plugin, model, model_dir=model_dir, options=request["options"])
        result = runner.run(feeds)
        _save_outputs(folder / "outputs.npz", result, name=request["name"])
    except RunnerUnavailable as err:
        write_answer({"unavailable": str(err)})
        return
    except HarnessError as err:  # UserError, RunnerError: the runner's own words, as in-process
        write_answer({"error": str(err)})
        return
    except Exception as err:  # noqa: BLE001 - a plugin's bug: its traceback to stderr, one line to the parent
        traceback.print_exc()
        write_answer({"error": f"runner {request['name']} raised {type(err).__name__}: {err}"})
        return
    write_answer(
        {"runner": result.runner, "rounds_low_precision": result.rounds_low_precision, "seconds": result.seconds}
    )


def _save_outputs(path: Path, result: RunResult, *, name: str) -> None:
    arrays: dict[str, Any] = {}
    for index, outputs in enumerate(result.outputs):
        if not isinstance(outputs, dict):
            raise RunnerError(f"runner {name} returned {type(outputs).__name__}, not {{output name: array}}")
        for out, value in outputs.items():
            array = np.asarray(value)
            if array.dtype == object:
                raise RunnerError(f"runner {name} returned an object array for output {out!r}: return numbers")
            arrays[f"{index}/{out}"] = array
    np.savez(path, **arrays)


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of ``path``; bfloat16 (which ``.npz`` keeps as 2-byte void, ml_dtypes being unknown to numpy's
    format) comes back as bfloat16."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    return {k: v.view(BFLOAT16) if v.dtype.kind == "V" and v.dtype.itemsize == 2 else v for k, v in arrays.items()}
