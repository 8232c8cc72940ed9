"""Who uses a golden, and which goldens nothing used: the golden lifecycle of ``castguard goldens``.

* :func:`with_usage`: the ``used_by`` entry of a golden's sidecar: the sweep cases and test ids of the run that
  wrote it;
* :func:`stored_goldens` / :func:`unused_goldens`: every golden under a goldens folder, and those that no case of
  a (complete) run used, keyed by ``(model key, inputs id)`` as the report's cases are.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.data.goldens import Golden


def with_usage(golden: Golden, *, cases: Sequence[str], tests: Sequence[str]) -> Golden:
    """``golden`` whose sidecar will list the case ids and test ids that use it (sorted, for stable bytes)."""
    return replace(golden, meta={**golden.meta, "used_by": {"cases": sorted(cases), "tests": sorted(tests)}})


@dataclass(frozen=True)
class StoredGolden:
    model: str  # the model key (the golden's folder)
    inputs_id: str  # the input recipe id (the file's stem)
    path: Path  # the .npz

    @property
    def files(self) -> tuple[Path, Path]:
        """The ``.npz`` and its ``.json`` sidecar."""
        return self.path, self.path.with_suffix(".json")


def stored_goldens(root: Path) -> tuple[StoredGolden, ...]:
    """Every ``<root>/<model>/<inputs-id>.npz`` (sorted); a missing folder holds none."""
    if not root.is_dir():
        return ()
    return tuple(
        StoredGolden(model=path.parent.name, inputs_id=path.stem, path=path)
        for path in sorted(root.glob("*/*.npz"))
        if not path.name.startswith(".")
    )


def unused_goldens(root: Path, used: Collection[tuple[str, str]]) -> tuple[StoredGolden, ...]:
    """The goldens under ``root`` whose ``(model, inputs id)`` is not in ``used``."""
    return tuple(g for g in stored_goldens(root) if (g.model, g.inputs_id) not in used)
