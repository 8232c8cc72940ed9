"""Print a pip constraints file pinning every runtime dependency of castguard to its declared minimum.

    python .ci/floors.py [pyproject.toml] > floors.txt
    pip install --constraint floors.txt .

Each ``name>=X`` of ``[project] dependencies`` becomes ``name==X`` (its environment marker kept); a dependency
without a ``>=`` floor is an error, so every new dependency gets one. Used by .ci/legs/15-floors.sh.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

FLOOR = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?$")


def floors(pyproject: Path) -> list[str]:
    dependencies = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    lines = []
    for requirement in dependencies:
        match = FLOOR.match(requirement)
        if match is None:
            raise SystemExit(f"{pyproject}: cannot read the dependency {requirement!r}")
        name, specifiers, marker = match.groups()
        lower = [s.strip()[2:].strip() for s in specifiers.split(",") if s.strip().startswith(">=")]
        if len(lower) != 1:
            raise SystemExit(f"{pyproject}: dependency {requirement!r} has no single >= floor; declare one")
        lines.append(f"{name}=={lower[0]}{' ' + marker if marker else ''}")
    return lines


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "pyproject.toml"
    print("\n".join(floors(path)))
