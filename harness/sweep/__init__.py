"""The conversion-settings sweep: what a ``pytest --model X`` run tries, and each case's stable id.

``grid`` holds the grid (:class:`SweepSpec`, :class:`SweepPoint`, :func:`expand`); ``sources`` builds a spec
from pyproject, a ``--sweep`` file and command-line options (its docstring has the default table).
"""

from __future__ import annotations

from harness.sweep.exclusions import BUILTIN_EXCLUSIONS, SENSITIVE_OPS, ExclusionSet
from harness.sweep.grid import NODE_PRECISIONS, PRECISIONS, SweepPoint, SweepSpec, expand, format_number
from harness.sweep.sources import SweepOptions, build_sweep_spec, load_sweep_spec
from harness.sweep.values import parse_node_precisions

__all__ = [
    "BUILTIN_EXCLUSIONS",
    "NODE_PRECISIONS",
    "PRECISIONS",
    "SENSITIVE_OPS",
    "SweepPoint",
    "ExclusionSet",
    "SweepOptions",
    "SweepSpec",
    "build_sweep_spec",
    "expand",
    "format_number",
    "load_sweep_spec",
    "parse_node_precisions",
]
