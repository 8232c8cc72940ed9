"""The code shape of harness/ against the house rules (issue 29): figures, not assertions.

    python benchmarks/code_shape.py [--tree DIR] [--rev REV] [--list]

Prints, for a tree (default the repo's ``harness/``), the number of functions with 6 or more parameters (every
parameter except a method's ``self``/``cls`` counts, keyword-only and ``*args``/``**kwargs`` included), of functions
over 60 lines, of modules over 300 lines, of functions under ``pipeline/`` over 40 lines or with 6+ parameters, and,
when the ``duplicates`` command is on PATH, the pairs it lists within the tree (``duplicates --repo TREE``: both sides
in the tree). ``--rev REV`` measures ``harness/`` of a commit instead, unpacked with ``git archive`` into a temporary
folder, so that a before/after is reproducible. ``--list`` names each function and module counted.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANY_PARAMS = 6
LONG_FUNCTION = 60
LONG_MODULE = 300
PIPELINE_LINES = 40


@dataclass(frozen=True)
class Function:
    where: str
    name: str
    params: int
    lines: int


def _param_count(node: ast.FunctionDef | ast.AsyncFunctionDef, *, method: bool) -> int:
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    if method and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    return len(positional) + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)


def _functions(tree: ast.AST, where: str, *, method: bool = False) -> Iterator[Function]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            yield Function(f"{where}:{node.lineno}", node.name, _param_count(node, method=method), lines)
            yield from _functions(node, where)
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, where, method=True)
        else:
            yield from _functions(node, where, method=method)


def _duplicate_pairs(tree: Path) -> int | None:
    if shutil.which("duplicates") is None:
        return None
    out = subprocess.run(
        ["duplicates", "--repo", str(tree), "--most", "200", "--seconds", "120"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    first = out.splitlines()[0] if out else ""
    if first.startswith("no duplicates"):
        return 0
    found = re.match(r"(\d+) pairs", first)
    return int(found.group(1)) if found else None


def measure(tree: Path, *, listing: bool) -> None:
    functions: list[Function] = []
    long_modules: list[tuple[str, int]] = []
    for path in sorted(tree.rglob("*.py")):
        where = path.relative_to(tree).as_posix()
        text = path.read_text(encoding="utf-8")
        functions.extend(_functions(ast.parse(text), where))
        if (count := len(text.splitlines())) > LONG_MODULE:
            long_modules.append((where, count))
    many = [f for f in functions if f.params >= MANY_PARAMS]
    long = [f for f in functions if f.lines > LONG_FUNCTION]
    pipeline = [
        f
        for f in functions
        if f.where.startswith("pipeline/") and (f.lines > PIPELINE_LINES or f.params >= MANY_PARAMS)
    ]
    pairs = _duplicate_pairs(tree)
    print(f"functions with {MANY_PARAMS}+ parameters: {len(many)}")
    print(f"functions over {LONG_FUNCTION} lines: {len(long)}")
    print(f"modules over {LONG_MODULE} lines: {len(long_modules)}")
    print(f"pipeline/ functions over {PIPELINE_LINES} lines or with {MANY_PARAMS}+ parameters: {len(pipeline)}")
    print(f"duplicates pairs within the tree: {'(no duplicates command)' if pairs is None else pairs}")
    if listing:
        for title, rows in (
            ("6+ parameters", [f"{f.where} {f.name} ({f.params})" for f in many]),
            ("over 60 lines", [f"{f.where} {f.name} ({f.lines})" for f in long]),
            ("modules over 300 lines", [f"{where} ({count})" for where, count in long_modules]),
            ("pipeline/", [f"{f.where} {f.name} ({f.lines} lines, {f.params} params)" for f in pipeline]),
        ):
            print(f"\n{title}:")
            print("\n".join(f"  {row}" for row in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO / "harness", help="the package folder to measure")
    parser.add_argument("--rev", help="measure harness/ of this commit instead (git archive into a temp folder)")
    parser.add_argument("--list", action="store_true", help="name what each figure counts")
    options = parser.parse_args()
    if options.rev is None:
        measure(options.tree, listing=options.list)
        return
    with tempfile.TemporaryDirectory(prefix="code-shape-") as temp:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", options.rev, "harness"], capture_output=True, check=False
        )
        if archive.returncode != 0:
            sys.exit(f"git archive {options.rev}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", temp], input=archive.stdout, check=True)
        print(f"harness/ at {options.rev}")
        measure(Path(temp) / "harness", listing=options.list)


if __name__ == "__main__":
    main()
