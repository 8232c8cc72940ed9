"""Targeted search for inputs on which a converted model stops matching its FP32 golden (no pytest here).

:class:`~harness.search.pairing.PairedRun` runs one feed through the FP32 model (ORT CPU, the golden producer) and through the
converted model on a rounding runner (``emulate``), and compares with the precision-aware tolerances.
:func:`search` asks Hypothesis for the minimal failing feed (``hypothesis.find``); every tried feed reports
``target(error / tolerance)`` so the search climbs toward the worst input. :func:`save_finding` writes the
shrunk feed (``.npz``, in the FP32 model's dtypes, so ``--inputs`` can take it too) and a ``.json`` sidecar
with everything a replay needs; ``castguard replay FILE.npz`` reruns it exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np
import onnx
from hypothesis import find, settings, target
from hypothesis.errors import NoSuchExample
from hypothesis.strategies import SearchStrategy

from harness.convert import ConvertOptions, Magnitudes, convert
from harness.core.dtypes import BFLOAT16, LOW_TYPES, bf16_to_bits, np_dtype
from harness.core.errors import InputDataError
from harness.core.files import atomic_write, atomic_write_text
from harness.core.jsonfile import JsonObject
from harness.core.npzfile import save_npz
from harness.data.feedfiles import load_feed_file
from harness.data.feeds import Feed, cast_feeds, input_specs, validate_feeds
from harness.data.models import model_sha256
from harness.data.onnxfile import load_model
from harness.judge.paired import Verdict
from harness.judge.tolerances import TolerancePolicy
from harness.search.pairing import PairedRun

if TYPE_CHECKING:
    from harness.pipeline.session import AccuracySession, Case

SCHEMA_VERSION = 1
TARGET_LABEL = "max error / tolerance"


@dataclass(frozen=True)
class HuntOutcome:
    """What one search did: how many feeds it tried, the best score seen, and the shrunk failure if any."""

    examples: int
    best_score: float
    feed: Feed | None = None
    verdict: Verdict | None = None


def search(
    judge: PairedRun,
    feeds: SearchStrategy[Feed],
    *,
    profile: settings | None = None,
    seed: int | None = None,
    database_key: bytes | None = None,
) -> HuntOutcome:
    """The minimal failing feed of ``feeds`` (Hypothesis ``find``: search, target, shrink), or none.

    ``profile`` defaults to the loaded Hypothesis profile; ``seed`` makes a run reproducible under a
    profile that is not derandomized; ``database_key`` (:func:`database_key`) keeps one entry per search.
    """
    tried = 0
    best = 0.0

    def fails(feed: Feed) -> bool:
        nonlocal tried, best
        verdict = judge(feed)
        tried += 1
        best = max(best, verdict.score)
        target(verdict.score, label=TARGET_LABEL)
        return verdict.failed

    try:
        found = find(
            feeds,
            fails,
            settings=settings(profile, deadline=None),
            random=Random(seed) if seed is not None else None,
            database_key=database_key,
        )
    except NoSuchExample:
        return HuntOutcome(examples=tried, best_score=best)
    return HuntOutcome(examples=tried, best_score=best, feed=found, verdict=judge(found))


def database_key(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(("castguard-adversarial", *parts)).encode()).digest()


@dataclass(frozen=True)
class Saved:
    npz: Path
    sidecar: Path
    command: str


@dataclass(frozen=True)
class FindingSource:
    """What a saved finding replays: the FP32 model, the conversion's options and magnitudes, and how it was found."""

    model_path: Path
    options: ConvertOptions
    magnitudes: Magnitudes | None
    hypothesis_note: str = ""


def save_finding(outcome: HuntOutcome, judge: PairedRun, *, directory: Path, stem: str, source: FindingSource) -> Saved:
    """Write ``<directory>/<stem>.npz`` (the feed, widened to the FP32 model's dtypes; bf16 as uint16 bits)
    and ``<stem>.json`` (model, options, magnitudes, verdict, the judge's runner); return the replay command."""
    model_path, options, magnitudes = source.model_path, source.options, source.magnitudes
    if outcome.feed is None or outcome.verdict is None:
        raise ValueError("save_finding needs an outcome with a failing feed")
    npz, sidecar = directory / f"{stem}.npz", directory / f"{stem}.json"
    wide = judge.golden_feed(outcome.feed)
    arrays = {k: bf16_to_bits(v) if v.dtype == BFLOAT16 else v for k, v in wide.items()}
    atomic_write(npz, lambda handle: save_npz(handle, arrays))
    command = f"castguard replay {shlex.quote(str(npz))}"
    doc = {
        "schema_version": SCHEMA_VERSION,
        "model": str(model_path.resolve()),
        "model_sha256": model_sha256(model_path),
        "runner": judge.runner,
        "options": dataclasses.asdict(options),
        "tolerances": dataclasses.asdict(judge.policy),
        "magnitudes": json.loads(magnitudes.to_json()) if magnitudes is not None else None,
        "score": outcome.verdict.score,
        "examples": outcome.examples,
        "hypothesis": source.hypothesis_note,
        "summary": outcome.verdict.comparison.summary(),
        "replay": command,
    }
    atomic_write_text(sidecar, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return Saved(npz=npz, sidecar=sidecar, command=command)


@dataclass(frozen=True)
class CaseSearch:
    """An adversarial search over one sweep case: what ran, and the saved failure (if one was found)."""

    outcome: HuntOutcome
    domain: str
    saved: Saved | None = None

    @property
    def failed(self) -> bool:
        return self.outcome.verdict is not None and self.outcome.verdict.failed


def cast_limits(
    converted: onnx.ModelProto, *, given: Sequence[tuple[str, float, float]] = ()
) -> tuple[tuple[str, float, float], ...]:
    """Ranges for graph inputs the converted model casts down to fp16/bf16 (keep_io_types): the low type's
    finite range, so that the search does not just overflow the model's first Cast. Inputs covered by a
    ``given`` range (named, or any unnamed one) get none."""
    if any(not name for name, _, _ in given):
        return ()
    named = {name for name, _, _ in given}
    inputs = {v.name for v in converted.graph.input} - {i.name for i in converted.graph.initializer}
    limits: dict[str, float] = {}
    for node in converted.graph.node:
        to = next((a.i for a in node.attribute if a.name == "to"), None) if node.op_type == "Cast" else None
        if to in LOW_TYPES and node.input[0] in inputs and node.input[0] not in named:
            high = float(ml_dtypes.finfo(np_dtype(to)).max)  # type: ignore[no-untyped-call]
            limits[node.input[0]] = min(limits.get(node.input[0], high), high)
    return tuple((name, -high, high) for name, high in sorted(limits.items()))


def search_domain(val_ranges: Sequence[tuple[str, float, float]]) -> str:
    """The input domain a search covers, in words."""
    if not val_ranges:
        return "every value the converted inputs hold"
    ranges = ", ".join(f"{n or 'all inputs'}:[{lo:g},{hi:g}]" for n, lo, hi in val_ranges)
    return ranges + "; other inputs: every value their dtype holds"


def search_case(
    session: AccuracySession, sweep_case: Case, *, profile: settings | None = None, hypothesis_note: str = ""
) -> CaseSearch:
    """Search the sweep case's conversion (magnitudes and conversion shared with the sweep) on ``emulate``,
    over ``--val-range``/``--input-shapes`` (no range: everything the converted inputs can hold)."""
    from harness.pipeline.case import convert_cached
    from harness.search.strategies import feeds

    name, case = sweep_case.model, sweep_case.case
    golden, _ = session.golden(name, allow_update=False)
    ctx, _ = session.context(name, golden)
    conversion, _, _ = convert_cached(ctx, case, session.cache)
    config = session.config
    val_ranges = (*cast_limits(conversion.model, given=config.val_ranges), *config.val_ranges)
    strategy = feeds(conversion.model, val_ranges=val_ranges, input_shapes=config.input_shapes)
    domain = search_domain(val_ranges)
    with PairedRun(
        ctx.model,
        conversion.model,
        precision=case.precision,
        policy=config.tolerances,
        model_dir=ctx.spec.path.parent,
        converted_dir=conversion.base_dir,
    ) as judge:
        outcome = search(
            judge,
            strategy,
            profile=profile,
            database_key=database_key(ctx.spec.sha256, repr(case.convert_options()), domain),
        )
        if outcome.feed is None or not (outcome.verdict and outcome.verdict.failed):
            return CaseSearch(outcome=outcome, domain=domain)
        saved = save_finding(
            outcome,
            judge,
            directory=config.report_dir / "adversarial" / name,
            stem=case.id,
            source=FindingSource(ctx.spec.path, case.convert_options(), ctx.magnitudes, hypothesis_note),
        )
    return CaseSearch(outcome=outcome, domain=domain, saved=saved)


def failure_message(sweep_case: Case, found: CaseSearch) -> str:
    """What the suite prints for a found failure: the shrunk input, the comparison, the files, the fixes."""
    outcome, saved = found.outcome, found.saved
    assert outcome.feed is not None and outcome.verdict is not None and saved is not None
    arrays_text = [
        f"  {k} ({v.dtype}, shape {list(v.shape)}) = "
        + np.array2string(np.asarray(v, dtype=np.float64), threshold=64, separator=", ", max_line_width=110).replace(
            "\n", "\n    "
        )
        for k, v in outcome.feed.items()
    ]
    summary = "\n".join("  " + line for line in outcome.verdict.comparison.summary().splitlines())
    return "\n".join(
        [
            f"{sweep_case.model} [{sweep_case.case.id}]: Hypothesis found an input on which the converted model "
            f"misses its FP32 golden on emulate ({outcome.examples} inputs tried; shrunk; search domain: {found.domain}):",
            *arrays_text,
            summary,
            f"  saved: {saved.npz} (+ {saved.sidecar.name})",
            f"  replay: {saved.command}",
            "  fix: keep the nodes that break in fp32 (see the sweep case's first divergent tensor), or, if such "
            "inputs cannot occur, narrow the search with --val-range NAME:[lo,hi]",
        ]
    )


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples the frozen dataclasses hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def replay(npz: Path) -> Verdict:
    """Rerun a saved finding: same model (checked by sha256), options, magnitudes, feed and runner."""
    sidecar = npz.with_suffix(".json")
    fix = "keep the .json that save_finding wrote next to the .npz"
    doc = JsonObject.read(sidecar, what="finding's sidecar", fix=fix, error=InputDataError)
    try:
        if doc.get("schema_version", int) != SCHEMA_VERSION:
            raise ValueError(f"schema_version {doc.data['schema_version']!r}, expected {SCHEMA_VERSION}")
        model_path = Path(doc.get("model", str))
        options = ConvertOptions(**{k: _tuples(v) for k, v in doc.object("options").data.items()})
        policy = TolerancePolicy(**{k: _tuples(v) for k, v in doc.object("tolerances").data.items()})
        raw_mags = doc.get("magnitudes", dict, None)
        mags = Magnitudes.from_json(json.dumps(raw_mags)) if raw_mags is not None else None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputDataError(
            where=sidecar,
            problem=f"cannot read the finding's sidecar: {err}",
            fix="keep the .json that save_finding wrote next to the .npz",
        ) from err
    model = load_model(model_path)
    if model_sha256(model_path) != doc.get("model_sha256", str):
        raise InputDataError(
            where=model_path,
            problem="the model changed since the finding was saved",
            fix="rerun the adversarial search on the current model",
        )
    converted = convert(model, options=options, magnitudes=mags).model
    feed = validate_feeds(load_feed_file(npz), input_specs(model), where=str(npz))[0]
    with PairedRun(
        model,
        converted,
        precision=options.low_precision_type,
        policy=policy,
        runner=doc.get("runner", str),
        model_dir=model_path.parent,
    ) as judge:
        return judge(cast_feeds([feed], input_specs(converted))[0])
