"""Imports inside ``harness`` point one way: down the stages of the data flow (docs/ARCHITECTURE.md).

A module may import its own folder, or a unit on an earlier line of :data:`LAYERS`. Units on the same line are
peers and may not import each other (``convert`` and ``runners`` are independent stages). The check reads the
source with :mod:`ast`, so imports inside functions count too.
"""
from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",), ("dtypes",), ("files", "ortenv"),
    ("data",),
    ("convert", "runners"),
    ("sweep",),
    ("judge",),
    ("report",),
    ("options",), ("config",),
    ("run",),
    ("check",),   # the castguard fixture's domain half (harness/check.py): runs cases through run/session
    ("nightly",),
    ("search",),
    ("tune",),
    ("plugin", "cli"),
    ("adversarial",),  # compatibility shim for old findings' ``python -m harness.adversarial``: calls cli
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
EXEMPT = {"__init__", "__main__"}  # the package's declared API and the ``python -m harness`` entry re-export


def unit_of(dotted: str) -> str | None:
    """``harness.convert.casts`` -> ``convert``; ``harness`` itself -> None."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "harness" else None


def harness_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) for every ``harness`` import in one file, ``from harness import x`` resolved to x."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("harness")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "harness":
                found += [(node.lineno, f"harness.{alias.name}") for alias in node.names
                          if alias.name != "__version__"]
            elif node.module.startswith("harness."):
                found.append((node.lineno, node.module))
    return found


def violations() -> list[str]:
    bad: list[str] = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS.parent).with_suffix("")
        mod = ".".join(rel.parts)
        own = unit_of(mod)
        if own is None or own in EXEMPT:
            continue
        if own not in RANK:
            bad.append(f"{rel}: unit {own!r} is not in LAYERS; add it to its stage")
            continue
        for line, target in harness_imports(path):
            unit = unit_of(target)
            if unit is None or unit == own or unit in EXEMPT and target == "harness.__init__":
                continue
            if unit not in RANK or RANK[unit] >= RANK[own]:
                bad.append(f"{rel}.py:{line}: {own} imports {target} ({unit} is not an earlier stage)")
    return bad


def test_every_unit_is_placed_in_a_layer() -> None:
    units = {p.stem if p.is_file() else p.name for p in HARNESS.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert sorted(units - set(RANK) - EXEMPT) == []


def test_imports_point_down_the_stages() -> None:
    assert violations() == []


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    upward = tmp_path / "m.py"
    upward.write_text("from harness import run\nimport harness.report.io\nfrom harness import __version__\n")
    assert harness_imports(upward) == [(1, "harness.run"), (2, "harness.report.io")]
