"""Imports inside ``harness`` point one way: down the stages of the data flow (docs/ARCHITECTURE.md).

A module may import its own folder, or a unit on an earlier line of :data:`LAYERS`. Units on the same line are
peers and may not import each other (``convert`` and ``runners`` are independent stages). The check reads the
source with :mod:`ast`, so imports inside functions count too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("core", "bundled_models"),  # core: the small mechanisms; bundled_models: test_models/, installed in harness
    ("data",),
    ("convert", "runners"),
    ("sweep",),
    ("judge",),
    ("search",),  # Hypothesis machinery and deterministic hunts (the session-driven hunt is pipeline/hunt.py)
    ("tune",),  # castguard tune: its measuring and search, which diagnose reuses (the tuned case: pipeline/tuned.py)
    ("diagnose",),
    ("report",),
    ("options",),
    ("config",),
    ("pipeline",),
    ("check",),  # the castguard fixture's domain half (harness/check.py): runs cases through run/session
    ("nightly",),
    ("conductor",),  # one run's state object (harness.conductor), used by the plugin and the CLI
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
                found += [(node.lineno, f"harness.{alias.name}") for alias in node.names]
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
    units = {
        p.stem if p.is_file() else p.name
        for p in HARNESS.iterdir()
        if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    }
    assert sorted(units - set(RANK) - EXEMPT) == []


def test_imports_point_down_the_stages() -> None:
    assert violations() == []


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    upward = tmp_path / "m.py"
    upward.write_text("from harness import pipeline\nimport harness.report.io\nfrom harness import __version__\n")
    assert harness_imports(upward) == [(1, "harness.pipeline"), (2, "harness.report.io"), (3, "harness.__version__")]


def import_cycles(prefix: str) -> list[list[str]]:
    """Cycles among the modules under ``prefix`` (imports inside functions count, as everywhere in this file)."""
    modules = {
        ".".join(p.relative_to(HARNESS.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in HARNESS.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name.startswith(prefix):
            targets = set()
            for _line, target in harness_imports(path):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith(prefix) and target != name:
                    targets.add(target)
            graph[name] = targets
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def folder_cycles() -> list[tuple[str, str]]:
    """Pairs of top-level units (folders or modules of harness/) that reach each other through imports."""
    edges: dict[str, set[str]] = {}
    for path in HARNESS.rglob("*.py"):
        own = unit_of(".".join(path.relative_to(HARNESS.parent).with_suffix("").parts))
        for _line, target in harness_imports(path):
            unit = unit_of(target)
            if own is not None and unit is not None and unit != own:
                edges.setdefault(own, set()).add(unit)

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in edges.get(todo.pop(), set()) - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    return sorted((a, b) for a in edges for b in edges[a] if a in reaches(b) and a < b)


def test_harness_has_no_import_cycle_between_files_or_folders() -> None:
    """Issue 29: no module of harness/ reaches itself through imports (inside functions too), and no folder does."""
    assert import_cycles("harness") == []
    assert folder_cycles() == []


def test_the_folder_cycle_check_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for unit, other in (("x", "y"), ("y", "x")):
        (tmp_path / "harness" / unit).mkdir(parents=True)
        (tmp_path / "harness" / unit / "__init__.py").write_text(f"from harness.{other} import f\n")
    monkeypatch.setitem(globals(), "HARNESS", tmp_path / "harness")
    assert folder_cycles() == [("x", "y")]


def test_the_runners_have_no_import_cycle() -> None:
    """``runners/tensorrt/`` (once nine flat trt_*.py files with trt.py <-> trt_engine.py) and every other runner."""
    assert import_cycles("harness.runners") == []
    assert len({m for m in (p.stem for p in (HARNESS / "runners" / "tensorrt").glob("*.py"))}) >= 9


def test_the_cycle_check_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "harness" / "x"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from harness.x.b import g\n")
    (package / "b.py").write_text("from harness.x.a import f\n")
    monkeypatch.setitem(globals(), "HARNESS", tmp_path / "harness")
    assert import_cycles("harness.x") == [["harness.x.a", "harness.x.b", "harness.x.a"]]


# The judge is pure (data in, verdict out): modules that run models (runners, the conductor) stay out of judge/.
# The first-divergence search that ran models from judge/ moved to harness/diagnose/: no exception is left.
JUDGE_MAY_RUN: set[str] = set()
RUNS_MODELS = ("harness.runners", "harness.pipeline")


def judge_runner_imports(judge_dir: Path, *, allowed: set[str]) -> list[str]:
    """``file:line imports module`` for each runner (or conductor) import in judge/ outside ``allowed``."""
    bad = []
    for path in sorted(judge_dir.rglob("*.py")):
        rel = path.relative_to(HARNESS.parent).as_posix()
        if rel in allowed:
            continue
        bad += [
            f"{rel}:{line} imports {target}"
            for line, target in harness_imports(path)
            if any(target == m or target.startswith(m + ".") for m in RUNS_MODELS)
        ]
    return bad


def test_the_judge_imports_no_runner() -> None:
    assert judge_runner_imports(HARNESS / "judge", allowed=JUDGE_MAY_RUN) == []


def test_the_judge_rule_catches_a_runner_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = tmp_path / "harness" / "judge"
    judge.mkdir(parents=True)
    (judge / "x.py").write_text(
        "from harness.runners import make_runner\nfrom harness.judge.compare import Tolerance\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "HARNESS", tmp_path / "harness")
    assert judge_runner_imports(judge, allowed=set()) == ["harness/judge/x.py:1 imports harness.runners"]
