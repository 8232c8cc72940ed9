"""The tune cache: sensitivities and every measured plan, keyed by the model's sha256 and the settings.

``<cache_dir>/tune/<key>.json`` holds ``{"sensitivity": ..., "evaluations": {plan: measurement}}``. The key
hashes the model sha256, the base conversion options, the calibration feeds' bytes, the bound, and castguard's
code fingerprint (version + converter and tune sources), so any change misses, and re-tuning an unchanged model
replays its search from the file without a single new evaluation (as AMD Quark caches its sensitivities).
Written atomically (temp name + rename); an unreadable entry is a UserError naming the file to delete.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.convert import ConvertOptions
from harness.core.errors import UserError
from harness.core.files import atomic_write_text, own_folder
from harness.core.jsonfile import JsonObject
from harness.data.feeds import Feed
from harness.data.keys import code_fingerprint, content_key, feeds_digest
from harness.tune.bound import Bound
from harness.tune.probe import Sensitivity

SCHEMA_VERSION = 1


def tune_fingerprint() -> str:
    digest = hashlib.sha256(code_fingerprint().encode())
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def tune_key(*, model_sha256: str, options: ConvertOptions, feeds: Sequence[Feed], bound: Bound) -> str:
    return content_key("tune", tune_fingerprint(), model_sha256, repr(options), feeds_digest(feeds), repr(bound))


@dataclass
class TuneMemo:
    """What one cache entry holds (mutable while a tune runs)."""

    sensitivity: Sensitivity | None = None
    evaluations: dict[str, dict[str, object]] = field(default_factory=dict)


class TuneCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        return self.root / "tune" / f"{key}.json"

    def load(self, key: str) -> TuneMemo:
        path = self.path(key)
        if not path.is_file():
            return TuneMemo()
        fix = f"delete {path} (or the folder {self.root}); castguard rebuilds it"
        doc = JsonObject.read(path, what="tune cache entry", fix=fix)
        if doc.get("schema_version", int) != SCHEMA_VERSION:
            raise doc.fail("schema_version", f"is {doc.data['schema_version']!r}, expected {SCHEMA_VERSION}")
        evaluations = doc.object("evaluations")
        try:
            sens = Sensitivity.from_json(doc.get("sensitivity", dict)) if doc.data.get("sensitivity") else None
            return TuneMemo(sensitivity=sens, evaluations={k: evaluations.get(k, dict) for k in evaluations.data})
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise UserError(where=path, problem=f"unreadable tune cache entry ({err})", fix=fix) from None

    def store(self, key: str, memo: TuneMemo) -> None:
        path = self.path(key)
        doc = {
            "schema_version": SCHEMA_VERSION,
            "sensitivity": memo.sensitivity.to_json() if memo.sensitivity is not None else None,
            "evaluations": memo.evaluations,
        }
        own_folder(self.root)
        atomic_write_text(path, json.dumps(doc, sort_keys=True))
