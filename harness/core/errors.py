"""One exception hierarchy for castguard.

Every error a user can cause is a :class:`UserError`: its message names the file
(or option), the problem and the fix, so the plugin and the CLI can print it as
one line block with no traceback and exit non-zero.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

INTERRUPTED_EXIT = 130
"""Exit status after Ctrl-C (128 + SIGINT, the shell's convention) of ``castguard`` commands and of a pytest run
interrupted while castguard writes its report; every file castguard writes is atomic, so what is there is whole."""


class HarnessError(Exception):
    """Root of every castguard error."""


class UserError(HarnessError):
    """Bad input from the user: a file, an option or a value.

    ``str(err)`` is ``"<where>: <problem>\\n  fix: <fix>"``.
    """

    def __init__(self, *, where: str | Path | None, problem: str, fix: str) -> None:
        self.where = str(where) if where is not None else None
        self.problem = problem
        self.fix = fix
        head = f"{self.where}: {problem}" if self.where else problem
        super().__init__(f"{head}\n  fix: {fix}")


class DiskFull(UserError):
    """No space (or quota) left in a folder castguard writes to: goldens, the cache, the report, a model.

    Raised by :func:`harness.core.files.atomic_write`, which has removed its temporary file first, so nothing is left
    half-written and the previous file (if any) is untouched. ``folder`` is where the write failed.
    """

    def __init__(self, *, folder: Path, name: str, fix: str | None = None) -> None:
        self.folder = folder
        super().__init__(
            where=folder,
            problem=f"no space left on the device while writing {name}; nothing was "
            "written (the previous file, if any, is kept)",
            fix=fix
            or "free space, or point castguard at a folder on another disk (--goldens-dir, "
            "--cache-dir or --report-dir; castguard convert: --output_path)",
        )


class NotWritable(UserError):
    """A folder castguard writes to is read-only, not permitted, or not a folder (a file or a dangling link in its
    place). Raised by :func:`harness.core.files.atomic_write` (nothing written) and :func:`harness.core.folders.
    check_folder` (before anything runs). ``folder``: the path that is in the way."""

    def __init__(self, *, folder: Path, problem: str, fix: str) -> None:
        self.folder = folder
        super().__init__(where=folder, problem=problem, fix=fix)


class ModelError(UserError):
    """A model file is missing, unreadable or not ONNX."""


class ModelNotFound(ModelError, FileNotFoundError):
    """The model file does not exist. Also a ``FileNotFoundError``, as AutoCast's callers expect."""


class InputDataError(UserError):
    """An input/calibration file does not match the model or is unsafe."""


class GoldenError(UserError):
    """Base for golden-file problems."""


class GoldenMissing(GoldenError):
    """No golden existed; one was written and the test must fail once."""


class GoldenStale(GoldenError):
    """The golden was made from a different model (sha256 mismatch)."""


class GoldenCorrupt(GoldenError):
    """The golden file or its sidecar cannot be read."""


class GoldenRunFailed(GoldenError):
    """onnxruntime failed while running the FP32 model to make its golden: one error per model; its cases skip
    with :attr:`skip_reason`. ``model``: the model's key; ``runtime_message``: onnxruntime's own message."""

    def __init__(self, *, where: str | Path | None, problem: str, fix: str, model: str, runtime_message: str) -> None:
        super().__init__(where=where, problem=problem, fix=fix)
        self.model = model
        self.runtime_message = runtime_message

    @property
    def skip_reason(self) -> str:
        """One line for each of the model's cases (the full error is the golden test's)."""
        first = self.runtime_message.strip().splitlines()[0] if self.runtime_message.strip() else "no message"
        return f"no golden for {self.model!r}: onnxruntime failed on the FP32 model: {first[:240]}"


class ConversionError(UserError):
    """The converter cannot produce a valid model. Names the node and the step."""

    def __init__(
        self, *, where: str | Path | None, problem: str, fix: str, node: str | None = None, step: str | None = None
    ) -> None:
        self.node = node
        self.step = step
        prefix = []
        if step:
            prefix.append(f"step {step}")
        if node:
            prefix.append(f"node {node!r}")
        detail = (", ".join(prefix) + ": ") if prefix else ""
        super().__init__(where=where, problem=detail + problem, fix=fix)


class RunnerError(HarnessError):
    """A runner failed while building or running a model."""


class RunnerUnavailable(HarnessError):
    """A runner cannot be used here (e.g. tensorrt not installed). Tests skip with this reason."""


def unknown_key(key: str, valid: Iterable[str], *, where: str | Path, what: str = "key") -> UserError:
    """The usage error for a configuration key that does not exist: it names the nearest valid one (a typo such as
    ``goldens_dri``) and lists them all."""
    choices = sorted(valid)
    near = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return UserError(where=where, problem=f"unknown {what} {key!r}", fix=f"{hint}valid {what}s: {', '.join(choices)}")
