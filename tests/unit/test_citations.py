"""Files in the repository cite only what is in the repository.

Docstrings once cited ``shared/reference/*.md``, research notes kept beside the checkout but never in it; those facts
now live in ``docs/runtime-facts.md``. A citation that leaves the repository is any ``shared/`` path, or a relative
path that climbs out (``../``) to a document or script (``.md``, ``.py``, ``.json``, ...). Other uses of ``../`` are
not citations: ``.../harness`` (an ellipsis) or a refused location such as ``../secret.bin`` in an error example.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = (ROOT / "harness", ROOT / "docs")
TEXT_SUFFIXES = {".py", ".md", ".json", ".toml", ".txt", ".rst"}
OUTSIDE = re.compile(r"(?<![\w.])shared/|(?<!\.)\.\./[\w./-]*\.(?:md|py|json|txt|rst|sh|toml|ya?ml|ipynb)\b")


def outside_citations(text: str) -> list[str]:
    """The citations of paths outside the repository in one text, in order."""
    return [m.group(0) for m in OUTSIDE.finditer(text)]


def offending_files(folders: tuple[Path, ...], *, root: Path = ROOT) -> list[str]:
    """``path:line: citation`` for every citation outside the repository in the text files under ``folders``."""
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix not in TEXT_SUFFIXES or not path.is_file():
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                found += [f"{path.relative_to(root).as_posix()}:{number}: {c}" for c in outside_citations(line)]
    return found


def test_nothing_under_harness_or_docs_cites_a_path_outside_the_repository() -> None:
    assert offending_files(CHECKED) == []


def test_the_docs_that_docstrings_cite_exist() -> None:
    cited = set()
    for path in (ROOT / "harness").rglob("*.py"):
        cited |= set(re.findall(r"docs/[\w-]+\.md", path.read_text(encoding="utf-8")))
    assert "docs/runtime-facts.md" in cited
    assert sorted(c for c in cited if not (ROOT / c).is_file()) == []


def test_the_check_catches_the_old_citations() -> None:
    old = (
        "measured in ``shared/reference/ort_lowprecision.md`` §1.2\n"
        "Style: `../shared/reference/style.md`\n"
        "The script `../tools/probe_ops.py OUT` reruns them\n"
    )
    assert outside_citations(old) == ["shared/", "../shared/reference/style.md", "../tools/probe_ops.py"]


def test_the_check_leaves_non_citations_alone() -> None:
    fine = (
        "``python .../harness/convert/refrun.py``; a location such as ``../secret.bin`` is refused;\n"
        "see ``docs/runtime-facts.md`` §2 and harness/runners/shared_state.py\n"
    )
    assert outside_citations(fine) == []


def test_a_file_with_an_old_citation_is_reported(tmp_path: Path) -> None:
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "m.py").write_text('"""Facts: ``shared/reference/gpu.md``."""\n')
    assert offending_files((tmp_path / "harness",), root=tmp_path) == ["harness/m.py:1: shared/"]


DOTTED = re.compile(r"\bharness(?:\.\w+)+")


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names an importable module (its parent must be a package for that)."""
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:  # the parent is a plain module: the name is an attribute, if anything
        return False


def unresolved_references(files: list[Path], *, harness: Path = ROOT / "harness") -> list[str]:
    """``file:line: name`` for each dotted ``harness.x.y`` name in ``files`` that names no module of ``harness``, or no
    attribute of the longest module it starts with (a docstring citing a module that was renamed or never was)."""
    modules = {
        ".".join(p.relative_to(harness.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in harness.rglob("*.py")
    }
    bad = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in DOTTED.findall(line):
                parts = name.split(".")
                known = max((k for k in range(1, len(parts) + 1) if ".".join(parts[:k]) in modules), default=0)
                if known == len(parts):
                    continue
                if known and is_module(".".join(parts[: known + 1])):
                    continue  # a module found outside harness/: harness.bundled_models is test_models/
                if known == 0 or not hasattr(importlib.import_module(".".join(parts[:known])), parts[known]):
                    where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
                    bad.append(f"{where}:{number}: {name}")
    return bad


def test_dotted_harness_names_in_harness_resolve() -> None:
    files = sorted((ROOT / "harness").rglob("*.py"))
    assert unresolved_references(files) == []


def test_a_renamed_module_in_a_docstring_is_reported(tmp_path: Path) -> None:
    doc = tmp_path / "m.py"
    doc.write_text(
        '"""Each step of :mod:`harness.pipeline.pipeline` fills ``harness.judge.tolerances.TolerancePolicy``;\n'
        'the policy (``harness.tolerances``); :class:`harness.report.CaseRecord`; harness.bundled_models."""\n'
    )
    assert unresolved_references([doc]) == ["m.py:1: harness.pipeline.pipeline", "m.py:2: harness.tolerances"]
