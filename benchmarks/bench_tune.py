"""``castguard tune`` against the default conversion, segment halving, and onnxconverter-common.

Run from the repository root: ``python benchmarks/bench_tune.py [--models a,b] [--extra DIR] [--bf16]``.
Figures only, printed as a table (no assertions). Per model, all on the same calibration inputs
(4 feeds; bundled models use their own default data) and the same bound (fp16: normalized max error 1e-3):

* default: ``convert`` with AutoCast's defaults (data_max 512), measured on ``emulate``;
* tune: ``castguard tune`` (no cache): evaluations, wall time, FP32 nodes kept, low-precision FLOP share, and
  the issue's target ``evals <= 2 (K + 1) log2 C + 10``; then the same tune again from a warm cache;
* halving: onnxconverter-common's segment-halving algorithm run on castguard's own oracle (same candidates,
  converter and ``emulate``), to compare the search alone;
* occ: ``onnxconverter_common.auto_mixed_precision.auto_convert_mixed_precision`` itself (optional import:
  ``pip install onnxconverter-common``), with a ``validate_fn`` that applies the same bound on its ORT CPU
  runs (its own single feed: the first calibration feed); its attempts, wall time, FLOP share, and whether its
  model passes the bound on ``emulate`` over all calibration feeds.

``--extra DIR`` adds every ``*.onnx`` in DIR (e.g. timm/transformers exports made elsewhere; random feeds in
[-1, 1]). Built models come from ``test_models/tune_models.py`` (transformer-like and CNN-like graphs built
with onnx.helper: torch/timm/transformers are not installed on the CPU workplace).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import math
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.convert import ConvertOptions, ReferenceData, collect_magnitudes, convert  # noqa: E402
from harness.convert.calibration import load_calibration  # noqa: E402
from harness.convert.flops import flop_share  # noqa: E402
from harness.convert.graphinfo import build_info  # noqa: E402
from harness.core.errors import UserError  # noqa: E402
from harness.tune.bound import Bound, measure  # noqa: E402
from harness.tune.engine import TuneSettings, candidates_of, range_options, tune  # noqa: E402
from harness.tune.oracle import BudgetExhausted, Oracle, Setup, fp32_outputs  # noqa: E402
from test_models import tune_models  # noqa: E402

BUILT: dict[str, Callable[[], onnx.ModelProto]] = {
    "residual_cancel": tune_models.residual_cancel,
    "wide_activations": tune_models.wide_activations,
    "transformer_like_4": lambda: tune_models.residual_stack(depth=4),
    "transformer_like_12": lambda: tune_models.residual_stack(depth=12, width=96),
    "cnn_like_3": lambda: tune_models.conv_stack(blocks=3),
    "cnn_like_8": lambda: tune_models.conv_stack(blocks=8, channels=24, size=24),
}
BUNDLED = ("mnist", "transformer_block", "needs_constraints", "explicit_typing", "if_branch")


def _calibration(model: onnx.ModelProto, folder: Path, name: str, ranges: dict[str, tuple[float, float]]) -> Path:
    """4 feeds in one .npz (split on the batch dim by castguard's calibration loader when the batch is 1)."""
    rng = np.random.default_rng(7)
    inits = {i.name for i in model.graph.initializer}
    arrays = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = [
            d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in vi.type.tensor_type.shape.dim
        ]
        lo, hi = ranges.get(vi.name, (-1.0, 1.0))
        shape = (4 * dims[0], *dims[1:])
        if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:  # token ids of the transformers exports
            arrays[vi.name] = rng.integers(0, 1000, size=shape).astype(np.int64)
        else:
            arrays[vi.name] = rng.uniform(lo, hi, size=shape).astype(np.float32)
    path = folder / f"{name}.calib.npz"
    np.savez(path, **arrays)
    return path


def _models(args: argparse.Namespace, folder: Path) -> list[tuple[str, Path, Path]]:
    import test_models

    found = []
    for name in BUNDLED:
        entry = test_models.MODELS[name]
        inputs = test_models.default_inputs(name)
        calib = (
            inputs
            if inputs is not None and inputs.suffix == ".npz"
            else _calibration(onnx.load(entry.path), folder, name, test_models.default_val_ranges(name))
        )
        found.append((name, entry.path, calib))
    for name, build in BUILT.items():
        path = folder / f"{name}.onnx"
        onnx.save(build(), path)
        found.append((name, path, _calibration(onnx.load(path), folder, name, {})))
    for path in sorted(Path(args.extra).glob("*.onnx")) if args.extra else []:
        found.append((path.stem, path, _calibration(onnx.load(path), folder, path.stem, {})))
    wanted = set(args.models.split(",")) if args.models else None
    return [m for m in found if wanted is None or m[0] in wanted]


def _setup(path: Path, calib: Path, precision: str) -> Setup:
    model = onnx.load(path)
    feeds = load_calibration(calib, model)[0]
    mags = collect_magnitudes(model, calibration_data=calib)
    options = range_options(ConvertOptions(low_precision_type=precision), data_max_given=False)
    return Setup(
        model=model,
        options=options,
        magnitudes=mags,
        feeds=feeds,
        bound=Bound(precision=precision),
        goldens=fp32_outputs(model, feeds, model_dir=path.parent),
        model_dir=path.parent,
    )


def _share(setup: Setup, low: Callable[[onnx.NodeProto], bool]) -> float:
    info = build_info(setup.model)
    shapes = setup.magnitudes.shapes
    return flop_share(
        list(setup.model.graph.node), low, lambda n: tuple(shapes[n]) if n in shapes else None, dict(info.initializers)
    ).share


def segment_halving(oracle: Oracle, nodes: list[str]) -> tuple[frozenset[str], int]:
    """onnxconverter-common's SegmentList algorithm (largest undecided segment first; on failure split in two)."""
    segments: list[tuple[list[str], str]] = [(nodes, "?")]
    while any(state == "?" for _, state in segments):
        index = max((i for i, (_, s) in enumerate(segments) if s == "?"), key=lambda i: len(segments[i][0]))
        seg, _ = segments[index]
        blocked = [n for i, (s, state) in enumerate(segments) if i != index and state != "good" for n in s]
        if oracle.evaluate(blocked).passed:
            segments[index] = (seg, "good")
        elif len(seg) == 1:
            segments[index] = (seg, "bad")
        else:
            half = len(seg) // 2
            segments[index : index + 1] = [(seg[:half], "?"), (seg[half:], "?")]
    kept = frozenset(n for s, state in segments if state == "bad" for n in s)
    oracle.evaluate(kept)
    return kept, oracle.spent


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: int):  # type: ignore[no-untyped-def]
    """Stop a peer's run after ``seconds`` (SIGALRM; checked between Python bytecodes)."""

    def fire(signum: int, frame: object) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


PEER_TIMEOUT = 300


def _occ(setup: Setup, path: Path) -> dict[str, object]:
    try:
        from onnxconverter_common.auto_mixed_precision import auto_convert_mixed_precision
    except ImportError:
        return {"status": "not installed (pip install onnxconverter-common)"}
    bound = setup.bound
    feed = setup.feeds[0]
    names = [o.name for o in setup.model.graph.output]

    def validate(res0: list[np.ndarray], res1: list[np.ndarray]) -> bool:
        ref = [dict(zip(names, res0))]
        got = [dict(zip(names, res1))]
        return measure(got, ref, bound).passed

    text = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(text), _deadline(PEER_TIMEOUT):
            result = auto_convert_mixed_precision(onnx.load(path), feed, validate_fn=validate, keep_io_types=False)
    except _Timeout:
        return {"status": f"did not finish in {PEER_TIMEOUT} s ({text.getvalue().count('Running attempt')} attempts)"}
    except Exception as err:  # noqa: BLE001 - a peer tool's failure is a figure, not our bug
        return {
            "status": f"failed: {type(err).__name__}: {str(err)[:80]}",
            "attempts": text.getvalue().count("Running attempt"),
            "seconds": time.perf_counter() - start,
        }
    seconds = time.perf_counter() - start
    done = [line for line in text.getvalue().splitlines() if line.startswith("Done:")]
    blocked = set(ast.literal_eval(done[-1][len("Done:") :].strip())) if done else set()
    outputs = setup.run(result)
    passes = measure(outputs, setup.goldens, bound).passed
    return {
        "status": "ok",
        "attempts": text.getvalue().count("Running attempt") + 1,
        "seconds": seconds,
        "fp32_nodes": len(blocked),
        "share": _share(setup, lambda n: n.name not in blocked),
        "passes_on_emulate": passes,
    }


def _retry(row: dict[str, object], path: Path, calib: Path, options: ConvertOptions, setup: Setup) -> dict[str, object]:
    start = time.perf_counter()
    try:
        outcome = tune(
            path,
            options=options,
            reference=ReferenceData(calibration_data=calib),
            settings=TuneSettings(bound=setup.bound, budget=400, stress_examples=20),
        )
    except UserError as err:
        row["tune_error"] = str(err).splitlines()[0][:90]
        return row
    plan = outcome.plan
    k, c = len(plan.kept_fp32), max(plan.candidates, 2)
    row.update(
        tune_s=time.perf_counter() - start,
        tune_evals=plan.evaluations,
        tune_share=plan.lowp_flop_share,
        tune_k=k,
        candidates=plan.candidates,
        tune_ratio=outcome.search.best.measurement.ratio,
        complete=plan.complete,
        target=2 * (k + 1) * math.log2(c) + 10,
        stress=f"{plan.adversarial['examples']} tried" + (" FOUND" if plan.adversarial.get("found_failure") else ""),
    )
    return row


def bench(name: str, path: Path, calib: Path, precision: str, with_peers: bool) -> dict[str, object]:
    setup = _setup(path, calib, precision)
    row: dict[str, object] = {"model": name, "nodes": len(setup.model.graph.node)}
    default = convert(setup.model, options=ConvertOptions(low_precision_type=precision), magnitudes=setup.magnitudes)
    dm = measure(setup.run(default.model), setup.goldens, setup.bound)
    row.update(default_share=default.lowp_flop_share, default_pass=dm.passed, default_ratio=dm.ratio)
    reference = ReferenceData(calibration_data=calib)
    options = range_options(ConvertOptions(low_precision_type=precision), data_max_given=False)
    with tempfile.TemporaryDirectory() as cache:
        for label, cache_dir in (("tune", None), ("warm", Path(cache)), ("retune", Path(cache))):
            start = time.perf_counter()
            try:
                outcome = tune(
                    path,
                    options=options,
                    reference=reference,
                    settings=TuneSettings(
                        bound=setup.bound, budget=400, cache_dir=cache_dir, stress_examples=20 if label == "tune" else 0
                    ),
                )
            except UserError as err:
                if "unreachable" in str(err) and not options.keep_io_types:
                    row["note"] = "bound unreachable with low-precision graph I/O; tuned with keep_io_types"
                    _retry(row, path, calib, ConvertOptions(**{**options.__dict__, "keep_io_types": True}), setup)
                    break
                row[f"{label}_error"] = str(err).splitlines()[0][:90]
                break
            plan = outcome.plan
            row[f"{label}_s"] = time.perf_counter() - start
            row[f"{label}_evals"] = plan.evaluations
            if label == "tune":
                k, c = len(plan.kept_fp32), max(plan.candidates, 2)
                row.update(
                    tune_share=plan.lowp_flop_share,
                    tune_k=k,
                    candidates=plan.candidates,
                    tune_ratio=outcome.search.best.measurement.ratio,
                    complete=plan.complete,
                    target=2 * (k + 1) * math.log2(c) + 10,
                    stress=(
                        f"{plan.adversarial['examples']} tried, worst {plan.adversarial.get('worst_error_over_bound', 0):.2g}x"
                        + (" FOUND" if plan.adversarial.get("found_failure") else "")
                    ),
                )
    if with_peers:
        _, candidates = candidates_of(setup)
        oracle = Oracle(setup, budget=2000)
        start = time.perf_counter()
        try:
            with _deadline(PEER_TIMEOUT):
                kept, evals = segment_halving(oracle, candidates)
                final = oracle.evaluate(kept)
            row.update(
                halving_evals=evals,
                halving_s=time.perf_counter() - start,
                halving_share=final.lowp_flop_share,
                halving_pass=final.passed,
            )
        except BudgetExhausted:
            row.update(halving_evals=">2000")
        except _Timeout:
            row.update(halving_evals=f">{oracle.spent} (stopped after {PEER_TIMEOUT} s)")
        row["occ"] = _occ(setup, path) if precision == "fp16" else {"status": "fp16 only"}
    return row


def _fmt(row: dict[str, object]) -> str:
    def pct(key: str) -> str:
        value = row.get(key)
        return f"{100 * value:5.1f}%" if isinstance(value, float) else "   – "

    occ = row.get("occ", {})
    assert isinstance(occ, dict)
    occ_text = (
        f"occ {occ['attempts']} att {occ['seconds']:.1f}s share {100 * occ['share']:.1f}% "
        f"{'PASS' if occ['passes_on_emulate'] else 'FAILS'} on emulate"
        if occ.get("status") == "ok"
        else f"occ {occ.get('status', '–')}"
    )
    if "tune_error" in row:
        return f"{row['model']:22s} default {pct('default_share')} {'pass' if row['default_pass'] else 'FAIL'} | tune: {row['tune_error']}"
    halving = (
        (
            f"halving {row.get('halving_evals', '–')} ev share {pct('halving_share')}"
            f" {'pass' if row.get('halving_pass') else 'FAIL'}"
        )
        if "halving_evals" in row
        else ""
    )
    return (
        f"{row['model']:22s} n={row['nodes']:<4} default {pct('default_share')} "
        f"{'pass' if row['default_pass'] else 'FAIL'} ({row['default_ratio']:.2g}x) | tune {pct('tune_share')} "
        f"K={row['tune_k']}/{row['candidates']} {row['tune_evals']} ev (target {row['target']:.0f}) "
        f"{row['tune_s']:.1f}s warm-cache {row.get('retune_evals', '–')} ev {row.get('retune_s', 0):.1f}s "
        f"err {row['tune_ratio']:.2g}x{'' if row['complete'] else ' (budget)'}; stress {row['stress']} | "
        f"{halving} | {occ_text}" + (f" [{row['note']}]" if "note" in row else "")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated subset")
    parser.add_argument("--extra", default="", help="folder of extra .onnx models (random feeds in [-1, 1])")
    parser.add_argument("--bf16", action="store_true", help="also tune for bf16 (default vs tune only)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        models = _models(args, Path(tmp))
        for precision in ("fp16", "bf16") if args.bf16 else ("fp16",):
            print(f"== {precision} (bound {Bound(precision=precision).limit('')})", flush=True)
            for name, path, calib in models:
                try:
                    print(_fmt(bench(name, path, calib, precision, with_peers=precision == "fp16")), flush=True)
                except Exception as err:  # noqa: BLE001 - report the model and go on
                    print(f"{name:22s} ERROR {type(err).__name__}: {str(err).splitlines()[0][:150]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
