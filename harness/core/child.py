"""The one child-process protocol of castguard: JSON in, JSON out, a time-out, and a crash as a typed error.

Three things run in a child process so that a native crash (SIGSEGV, SIGFPE) or a library's log cannot reach
castguard's own process: the reference run (harness/convert/refrun.py), the TensorRT build
(harness/runners/tensorrt/plan.py) and the onnxruntime capability probe (harness/core/ortenv.py). All three use this
module, on both sides:

* parent: :func:`run_child` starts ``python SCRIPT`` (or ``python -c CODE``) with the request as JSON on stdin
  and returns the child's JSON answer with its stderr (:class:`ChildAnswer`); a child that cannot start, runs
  past ``timeout_s``, dies of a signal, exits non-zero or gives no answer is one :class:`ChildFailed` saying which
  (its ``kind``, ``signal``, ``returncode`` and the end of its stderr as fields);
* child: :func:`read_request` and :func:`write_answer`. This module imports only the standard library, so a
  child importing it (``from harness.core.child import ...``) loads no onnx, numpy or other harness module.

The answer is the last stdout line that starts with :data:`ANSWER_MARK`, so a native library that prints to
stdout cannot be mistaken for it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.core.errors import HarnessError

ANSWER_MARK = "castguard-child-answer: "
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding ``harness``

FailureKind = Literal["start", "timeout", "signal", "exit", "no-answer"]


class ChildFailed(HarnessError):
    """A child process gave no answer: it could not start, ran out of time, died of a signal, exited non-zero or
    printed no answer. Each caller turns it into its own error (or "unknown") from these fields."""

    def __init__(
        self,
        *,
        what: str,
        kind: FailureKind,
        returncode: int | None = None,
        timeout_s: float | None = None,
        stderr: str = "",
    ) -> None:
        self.what, self.kind, self.returncode, self.timeout_s = what, kind, returncode, timeout_s
        self.stderr = stderr
        self.signal: str | None = None
        if kind == "signal" and returncode is not None:
            try:
                self.signal = signal.Signals(-returncode).name
            except ValueError:
                self.signal = f"signal {-returncode}"
        super().__init__(f"{what}: {self.reason}")

    @property
    def reason(self) -> str:
        """``crashed with SIGSEGV``, ``no answer within 60 s``, ``exit status 3: <stderr>``..."""
        tail = " ".join(self.stderr.strip().splitlines()[-3:]) or "(nothing on stderr)"
        return {
            "start": f"could not start ({tail})",
            "timeout": f"no answer within {self.timeout_s:g} s" if self.timeout_s is not None else "timed out",
            "signal": f"crashed with {self.signal}",
            "exit": f"exit status {self.returncode}: {tail}",
            "no-answer": f"finished without an answer: {tail}",
        }[self.kind]


@dataclass(frozen=True)
class ChildAnswer:
    """A child's JSON answer and what it wrote to stderr (onnxruntime's and TensorRT's logs go there)."""

    answer: Any
    stderr: str


def run_child(
    program: Path | str,
    request: Any,
    *,
    what: str,
    timeout_s: float | None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ChildAnswer:
    """Run ``python program`` (a script path) or ``python -c program`` (code text) with ``request`` as JSON on
    stdin; its answer, or :class:`ChildFailed`. ``harness`` is importable in the child (this checkout first)."""
    command = [sys.executable, str(program)] if isinstance(program, Path) else [sys.executable, "-c", program]
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, base.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run(
            command,
            input=json.dumps(request),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=base,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
        raise ChildFailed(what=what, kind="timeout", timeout_s=timeout_s, stderr=stderr) from None
    except OSError as err:
        raise ChildFailed(what=what, kind="start", stderr=str(err)) from None
    if done.returncode < 0:
        raise ChildFailed(what=what, kind="signal", returncode=done.returncode, stderr=done.stderr)
    if done.returncode != 0:
        raise ChildFailed(what=what, kind="exit", returncode=done.returncode, stderr=done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith(ANSWER_MARK)]
    try:
        answer = json.loads(lines[-1][len(ANSWER_MARK) :])
    except (IndexError, ValueError):
        raise ChildFailed(what=what, kind="no-answer", returncode=0, stderr=done.stderr) from None
    return ChildAnswer(answer=answer, stderr=done.stderr)


# ---------------------------------------------------------------- the child's side (standard library only)


def read_request() -> Any:
    """The parent's request (JSON on stdin)."""
    return json.loads(sys.stdin.read() or "null")


def write_answer(answer: Any) -> None:
    """Give the parent the answer (one marked JSON line on stdout)."""
    sys.stdout.write("\n" + ANSWER_MARK + json.dumps(answer) + "\n")
    sys.stdout.flush()
