"""The per-tensor statistics of one model on one data set (:class:`Magnitudes`) and their JSON (a sweep caches
them per model and input set). :mod:`harness.convert.reference` runs onnxruntime to collect them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.core.errors import InputDataError

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Magnitudes:
    """Per-tensor reference statistics of one model on one data set (inf = non-finite seen). ``absmin``: the
    smallest non-zero finite magnitude of float tensors that have one (optional in the JSON)."""

    absmax: Mapping[str, float]
    shapes: Mapping[str, tuple[int, ...]]
    dtypes: Mapping[str, int]
    data_source: str
    batches: int = 1
    absmin: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "absmax": {k: ("inf" if math.isinf(v) else v) for k, v in sorted(self.absmax.items())},
                "shapes": {k: list(v) for k, v in sorted(self.shapes.items())},
                "dtypes": dict(sorted(self.dtypes.items())),
                "data_source": self.data_source,
                "batches": self.batches,
                "absmin": dict(sorted(self.absmin.items())),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Magnitudes:
        try:
            doc = json.loads(text)
            if doc.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
            return cls(
                absmax={k: float(v) for k, v in doc["absmax"].items()},
                shapes={k: tuple(int(d) for d in v) for k, v in doc["shapes"].items()},
                dtypes={k: int(v) for k, v in doc["dtypes"].items()},
                data_source=str(doc["data_source"]),
                batches=int(doc["batches"]),
                absmin={k: float(v) for k, v in doc.get("absmin", {}).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise InputDataError(
                where="magnitudes JSON",
                problem=f"cannot read cached magnitudes ({err})",
                fix="delete the cache file; it is rebuilt by collect_magnitudes",
            ) from None
