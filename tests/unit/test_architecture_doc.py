"""docs/ARCHITECTURE.md stays true: its module map names every module under ``harness/`` and nothing else, and its
layer-order line is ``tests/unit/test_layers.py``'s :data:`LAYERS`.

The map is the first fenced block after the ``## Module map`` heading; a row is an unindented line whose first word
ends in ``.py`` (a path relative to ``harness/``); indented lines continue the row above. The layer-order line starts with ``Layer order:``; ``→`` separates the
steps and each step lists its units in backticks, separated by commas.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_layers import LAYERS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
HARNESS = ROOT / "harness"
EXEMPT = {"__init__.py", "__main__.py"}


class DocFormatError(ValueError):
    """The document lacks the section or line the check reads."""


def module_map(text: str) -> list[str]:
    """The module paths named in the map's fenced block, in order."""
    lines = text.splitlines()
    try:
        start = lines.index("## Module map")
    except ValueError:
        raise DocFormatError("no '## Module map' heading") from None
    fences = [i for i in range(start + 1, len(lines)) if lines[i].startswith("```")]
    if len(fences) < 2:
        raise DocFormatError("the module map has no fenced block")
    rows = [line.split()[0] for line in lines[fences[0] + 1 : fences[1]] if line.strip() and not line[0].isspace()]
    return [row for row in rows if row.endswith(".py")]


def layer_order(text: str) -> tuple[tuple[str, ...], ...]:
    """The steps of the ``Layer order:`` line, each a tuple of its units."""
    found = [line for line in text.splitlines() if line.startswith("Layer order:")]
    if len(found) != 1:
        raise DocFormatError(f"expected one 'Layer order:' line, found {len(found)}")
    steps = found[0].removeprefix("Layer order:").split("→")
    return tuple(tuple(re.findall(r"`([^`]+)`", step)) for step in steps)


def harness_modules(harness: Path) -> set[str]:
    """Every ``.py`` under ``harness`` (except ``__init__``/``__main__``), relative to it, with ``/``."""
    return {p.relative_to(harness).as_posix() for p in harness.rglob("*.py") if p.name not in EXEMPT}


def map_problems(text: str, harness: Path) -> list[str]:
    named = module_map(text)
    existing = harness_modules(harness)
    problems = [f"named but missing under harness/: {m}" for m in named if m not in existing]
    problems += [f"exists but not named in the module map: {m}" for m in sorted(existing - set(named))]
    problems += [f"named twice: {m}" for m in sorted({m for m in named if named.count(m) > 1})]
    return problems


def test_the_module_map_names_exactly_the_modules_under_harness() -> None:
    assert map_problems(DOC.read_text(encoding="utf-8"), HARNESS) == []


def test_the_layer_order_line_is_test_layers_LAYERS() -> None:
    assert layer_order(DOC.read_text(encoding="utf-8")) == LAYERS


DOC_TEMPLATE = """# x

Layer order: `a` → `b`, `c` → `d`

## Module map

```text
a.py                one
b/c.py              two
                    continuation.py of two is not a row
```
"""


def fake_harness(tmp_path: Path) -> Path:
    harness = tmp_path / "harness"
    (harness / "b").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "b/__init__.py", "b/c.py", "__main__.py"):
        (harness / name).write_text("")
    return harness


def test_a_true_doc_passes(tmp_path: Path) -> None:
    assert map_problems(DOC_TEMPLATE, fake_harness(tmp_path)) == []
    assert layer_order(DOC_TEMPLATE) == (("a",), ("b", "c"), ("d",))


def test_a_doc_naming_a_missing_module_fails(tmp_path: Path) -> None:
    doc = DOC_TEMPLATE.replace("b/c.py              two", "b/c.py              two\nb/gone.py  removed")
    assert map_problems(doc, fake_harness(tmp_path)) == ["named but missing under harness/: b/gone.py"]


def test_a_module_missing_from_the_doc_fails(tmp_path: Path) -> None:
    harness = fake_harness(tmp_path)
    (harness / "b" / "new.py").write_text("")
    assert map_problems(DOC_TEMPLATE, harness) == ["exists but not named in the module map: b/new.py"]


def test_a_wrong_layer_order_is_seen() -> None:
    assert layer_order(DOC_TEMPLATE.replace("`b`, `c` → `d`", "`b` → `c`, `d`")) != (("a",), ("b", "c"), ("d",))


def test_a_doc_without_the_sections_is_a_format_error() -> None:
    with pytest.raises(DocFormatError):
        module_map("# nothing here\n")
    with pytest.raises(DocFormatError):
        layer_order("# nothing here\n")


# The doc's statements about the code, each checked (issue 29: the doc once made eight false ones).
MODULE_LINES_MAX = 450  # "modules of about 300 lines (none over 450 ...)"
HOOK_LINES_MAX = 3  # "each hook 1-3 lines on CastguardRun"


def test_the_stated_module_size_holds() -> None:
    assert f"none over\n{MODULE_LINES_MAX}" in DOC.read_text(encoding="utf-8")
    big = {
        str(p.relative_to(HARNESS)): n
        for p in HARNESS.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MODULE_LINES_MAX
    }
    assert big == {}


def test_the_plugins_hooks_are_one_to_three_lines() -> None:
    import ast

    assert "each hook 1-3 lines on CastguardRun" in DOC.read_text(encoding="utf-8")
    long = {}
    for node in ast.parse((HARNESS / "plugin" / "__init__.py").read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_"):
            body = (
                node.body[1:]
                if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
                else node.body
            )
            lines = (body[-1].end_lineno or 0) - body[0].lineno + 1
            if lines > HOOK_LINES_MAX:
                long[node.name] = lines
    assert long == {}


def test_the_judge_runs_and_renders_nothing() -> None:
    """ "judge/ ... runs and renders nothing": no runner, pipeline, report or plotting import under judge/."""
    from tests.unit.test_layers import harness_imports

    assert "runs and renders nothing" in DOC.read_text(encoding="utf-8")
    forbidden = ("harness.runners", "harness.pipeline", "harness.report", "harness.diagnose")
    bad = [
        f"{p.name}:{line} {target}"
        for p in (HARNESS / "judge").rglob("*.py")
        for line, target in harness_imports(p)
        if target.startswith(forbidden)
    ]
    bad += [
        p.name
        for p in (HARNESS / "judge").rglob("*.py")
        if "matplotlib" in p.read_text() or "onnxruntime" in p.read_text()
    ]
    assert bad == []


def test_one_object_holds_a_runs_state() -> None:
    """ "One run's state is one object": the plugin keeps one StashKey, holding the PluginState whose run is the
    one CastguardRun (built lazily since issue 34.2's lazy start-up)."""
    keys = [p.name for p in (HARNESS / "plugin").rglob("*.py") if "StashKey[" in p.read_text()]
    text = (HARNESS / "plugin" / "state.py").read_text()
    assert keys == ["state.py"] and "StashKey[PluginState]" in text and "run: CastguardRun | None" in text
