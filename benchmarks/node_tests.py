"""Convert every ONNX backend node test in two modes and count the outcomes (a script, not a test).

Run: ``python benchmarks/node_tests.py [--out FILE.json] [--filter REGEX] [--limit N] [--data-dir DIR]``

``--data-dir DIR`` converts the stored node tests instead: DIR is an onnx wheel's ``onnx/backend/test/data/node``
(wheels up to onnx 1.20 ship it; ``pip download --no-deps onnx==1.20.0`` and unzip), every ``*/model.onnx``
that has a ``test_data_set_0``, ``*_expanded*`` left out.

The node tests are the single-op models of ``onnx.backend.test.case.node`` (the models that the onnx
repository stores under ``onnx/backend/test/data/node``; the wheel does not ship that folder, so the models
are built here from the installed onnx package's test cases, which is what ``backend-test-tools
generate-data`` writes). ``*_expanded*`` variants (function bodies inlined) are left out.

Modes: ``fp16`` (AutoCast defaults) and ``bf16-keepio`` (``low_precision_type="bf16", keep_io_types=True``),
both through the public ``convert_to_mixed_precision`` with its default random reference data.

Outcomes per conversion:
- ``valid``: a model came back and :func:`tests.helpers.node_validity.validity_problem` finds nothing (onnx.checker
  full check, graph I/O names and shapes kept, onnxruntime CPU loads it where it has the kernels);
- ``refused``: a :class:`~harness.core.errors.UserError` that is not a validation failure (the reason is counted);
- ``invalid``: the converter produced a model that failed its own validation or that check (a converter bug);
- ``crash``: any other exception (a converter bug).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx.backend.test.case import node as node_cases

from harness.convert import convert_to_mixed_precision
from harness.core.errors import ConversionError, UserError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.helpers
from tests.helpers.node_validity import validity_problem  # noqa: E402

MODES: dict[str, dict[str, object]] = {"fp16": {}, "bf16-keepio": {"low_precision_type": "bf16", "keep_io_types": True}}


def node_test_models(pattern: str = "") -> Iterator[tuple[str, onnx.ModelProto]]:
    """(test name, model) for every non-expanded node test whose name matches `pattern` (re.search)."""
    regex = re.compile(pattern)
    seen: set[str] = set()
    for case in node_cases.collect_testcases(None):
        if "_expanded" in case.name or case.name in seen or not regex.search(case.name) or case.model is None:
            continue
        seen.add(case.name)
        yield case.name, case.model


def op_types(model: onnx.ModelProto) -> tuple[str, ...]:
    return tuple(sorted({n.op_type for n in model.graph.node}))


def stored_node_test_models(folder: Path, pattern: str = "") -> Iterator[tuple[str, onnx.ModelProto]]:
    """(test name, model) for every stored node test under `folder` with data, `*_expanded*` left out."""
    regex = re.compile(pattern)
    for path in sorted(folder.glob("*/model.onnx")):
        name = path.parent.name
        if "_expanded" not in name and regex.search(name) and (path.parent / "test_data_set_0").is_dir():
            yield name, onnx.load(path)


def outcome(path: Path, mode: str) -> tuple[str, str]:
    """('valid'|'refused'|'invalid'|'crash', detail) of converting the model at `path` in `mode`."""
    try:
        converted = convert_to_mixed_precision(str(path), **MODES[mode])  # type: ignore[arg-type]
    except ConversionError as err:
        if (err.step or "").startswith("validate"):
            return "invalid", str(err).splitlines()[0][:300]
        return "refused", f"{err.step}: {err.problem[:200]}"
    except UserError as err:
        return "refused", str(err).splitlines()[0][:200]
    except Exception as err:  # noqa: BLE001 - counting crashes is the point of this script
        return "crash", f"{type(err).__name__}: {str(err)[:200]}"
    problem = validity_problem(onnx.load(path), converted, low=str(MODES[mode].get("low_precision_type", "fp16")))
    return ("invalid", problem) if problem else ("valid", "")


def _reason_key(detail: str) -> str:
    """A short grouping key for a refusal (step and the first words of the problem)."""
    return re.sub(r"'[^']*'|\d+(\.\d+)?(e[-+]?\d+)?", "_", detail)[:110]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write per-test outcomes as JSON")
    parser.add_argument("--filter", default="", help="regex on test names")
    parser.add_argument("--limit", type=int, default=0, help="stop after N tests")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--data-dir", type=Path, help="convert the stored node tests in this folder instead")
    parser.add_argument("--shard", default="0/1", help="K/N: convert every N-th test starting at K (run N at once)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    results: dict[str, dict[str, object]] = {}
    counts: dict[str, collections.Counter[str]] = {m: collections.Counter() for m in args.modes}
    reasons: dict[str, collections.Counter[str]] = {m: collections.Counter() for m in args.modes}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="castguard-nodetests-") as tmp:
        shard, shards = (int(v) for v in args.shard.split("/"))
        models = stored_node_test_models(args.data_dir, args.filter) if args.data_dir else node_test_models(args.filter)
        for index, (name, model) in enumerate(models):
            if args.limit and index >= args.limit:
                break
            if index % shards != shard:
                continue
            path = Path(tmp) / f"{name}.onnx"
            onnx.save(model, path)
            entry: dict[str, object] = {"ops": list(op_types(model))}
            for mode in args.modes:
                kind, detail = outcome(path, mode)
                counts[mode][kind] += 1
                if kind != "valid":
                    reasons[mode][f"{kind}: {_reason_key(detail)}"] += 1
                    if kind in ("crash", "invalid"):
                        print(f"{name} [{mode}] {kind}: {detail}", flush=True)
                entry[mode] = [kind, detail]
            results[name] = entry
            path.unlink()
    elapsed = time.perf_counter() - start
    print(f"\n{len(results)} node tests, {elapsed:.0f} s")
    for mode in args.modes:
        print(f"{mode}: " + ", ".join(f"{k} {counts[mode][k]}" for k in ("valid", "refused", "invalid", "crash")))
        for reason, count in reasons[mode].most_common(25):
            print(f"    {count:4d}  {reason}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 1 if any(counts[m]["crash"] or counts[m]["invalid"] for m in args.modes) else 0


if __name__ == "__main__":
    sys.exit(main())
