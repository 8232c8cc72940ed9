"""Collect a report's :class:`~harness.report.model.Provenance` and timestamp.

Versions come from installed package metadata (nothing heavy is imported); the git commit is that of
the project under test, when its folder is a git work tree.
"""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from harness.convert.plugins import converter_sources
from harness.report.model import Provenance
from harness.runners.registry import runner_sources
from harness.runners.tensorrt.library import installed_backend


def utc_now() -> str:
    """The current time as ISO 8601 in UTC, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def package_version(name: str) -> str | None:
    """Installed version of a distribution, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_commit(project_dir: Path) -> str | None:
    """HEAD of the git work tree holding ``project_dir``; None when it is not in one or git is absent."""
    try:
        done = subprocess.run(
            ["git", "-C", str(project_dir), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def gpu_names() -> tuple[str, ...]:
    """The GPUs ``nvidia-smi -L`` lists, by name (``NVIDIA H100 80GB HBM3``); empty without nvidia-smi or a driver."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        done = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    lines = done.stdout.splitlines() if done.returncode == 0 else []
    return tuple(
        line.split(":", 1)[1].split("(UUID", 1)[0].strip() for line in lines if line.startswith("GPU ") and ":" in line
    )


def gpu_summary(names: Sequence[str]) -> str | None:
    """``2x NVIDIA H100 80GB HBM3``; None when there is no GPU."""
    return ", ".join(f"{count}x {name}" for name, count in Counter(names).items()) or None


def with_case_runners(provenance: Provenance, runners: Sequence[str]) -> Provenance:
    """The provenance with the runners the cases ran on added (a ``castguard`` fixture check may name a runner
    that is not in the project's sweep), each with its distribution and version."""
    new = tuple(n for n in dict.fromkeys(runners) if n not in provenance.runners)
    if not new:
        return provenance
    return replace(
        provenance,
        runners=(*provenance.runners, *new),
        runner_sources=(*provenance.runner_sources, *runner_sources(new)),
    )


def with_case_converters(provenance: Provenance, converters: Sequence[str]) -> Provenance:
    """The provenance with the converters the cases used (package and version of each; the candidate has none)."""
    known = {row[0] for row in provenance.converter_sources}
    new = converter_sources([n for n in dict.fromkeys(converters) if n not in known])
    return replace(provenance, converter_sources=(*provenance.converter_sources, *new)) if new else provenance


def collect_provenance(*, hypothesis_profile: str, runners: Sequence[str], project_dir: Path | None) -> Provenance:
    """Describe this machine and its packages; ``project_dir`` is where the models under test live."""
    return Provenance(
        castguard=package_version("castguard") or "not installed",
        onnx=package_version("onnx") or "not installed",
        onnxruntime=package_version("onnxruntime") or package_version("onnxruntime-gpu") or "not installed",
        numpy=package_version("numpy") or "not installed",
        python=sys.version.split()[0],
        platform=platform.platform(),
        hostname=socket.gethostname(),
        hypothesis_profile=hypothesis_profile,
        runners=tuple(runners),
        runner_sources=runner_sources(runners),
        git_commit=git_commit(project_dir) if project_dir is not None else None,
        tensorrt=installed_backend(),
        gpu=gpu_summary(gpu_names()),
    )


def hypothesis_profile(seed: object) -> str:
    """The Hypothesis profile this process runs under (``default`` where Hypothesis is not loaded: a run without a
    hunt never imports it), with a nightly run's seed, recorded to replay it."""
    hypothesis = sys.modules.get("hypothesis")
    name = hypothesis.settings.get_current_profile_name() if hypothesis is not None else "default"
    return name + (f" (seed {seed})" if seed is not None else "")
