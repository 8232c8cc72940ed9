"""The expensive step: one onnxruntime run that records every tensor's abs-max, shape and dtype.

The figures are reduced inside onnxruntime (:mod:`harness.convert.reductions`): the run returns a few numbers
per tensor, so it costs about one forward pass in time and memory whatever the shapes. ``reduce="copy"`` keeps
the former path (every tensor a graph output, copied out and reduced in numpy), which gives the same figures; it
is also the explicit fallback, with a warning, when onnxruntime refuses the added reductions.

A sweep calls :func:`collect_magnitudes` once per model and input set and then :func:`~harness.convert.convert`
many times. The run happens in a child process (``harness.convert.refrun``): an onnxruntime error
becomes a :class:`ConversionError` naming the node, and a native crash cannot kill the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx

from harness.convert.calibration import Feed, load_calibration, random_feeds
from harness.convert.childmodel import ChildModel, child_model, scratch_folder
from harness.convert.graphbuilder import PREFIX
from harness.convert.magnitudes import Magnitudes
from harness.convert.outputs import MAX_OUTPUT_BYTES, output_groups, pack, tensor_facts
from harness.convert.reductions import ReductionPlan, add_reductions, denominators
from harness.convert.referror import crash_error, refused_error
from harness.convert.refproviders import Provider, provider_list
from harness.core.child import ChildFailed, run_child
from harness.core.errors import InputDataError
from harness.core.npzfile import save_npz
from harness.data.onnxfile import is_lazy, load_model
from harness.data.sizing import DYNAMIC_DEFAULT

LOG = logging.getLogger("harness.convert")
REFRUN = Path(__file__).with_name("refrun.py")  # the child script (harness.core.child's protocol)
Reduce = Literal["graph", "copy"]
RAW_BELOW = 64 << 10
"""Tensors of at most this many bytes (at the first batch's shapes) come out whole on the graph path too: the
nodes reducing them would cost more (session load time) than copying them."""


@dataclass(frozen=True)
class ReferenceData:
    """Where the reference run gets its data and how it runs."""

    calibration_data: str | Path | Mapping[str, np.ndarray] | None = None
    input_shapes: Mapping[str, Sequence[int]] | None = None
    providers: tuple[str, ...] = ("cpu",)
    trt_plugins: tuple[str, ...] = ()
    seed: int = 0
    dynamic_default: int | None = DYNAMIC_DEFAULT
    """Size of a dynamic non-batch dim that neither ``input_shapes`` nor the calibration data gives (None:
    refuse it); :data:`~harness.data.sizing.DYNAMIC_DEFAULT`, the batch 1, named in one warning."""


@dataclass(frozen=True)
class ReductionPath:
    """How the reference run reduces the tensors: ``reduce`` "graph" inside onnxruntime, "copy" (the former path)
    in numpy from tensors onnxruntime returns, at most about ``max_output_bytes`` of them per run. The graph path
    records the smallest non-zero magnitude (``absmin``) of the tensors the converter reads it for (Div divisors,
    Pow bases: :func:`~harness.convert.reductions.denominators`); ``absmin_everywhere`` records it for every float
    tensor, as the copy path does (the equivalence test compares the two). Tensors of at most ``raw_below`` bytes
    come out whole on the graph path too (-1: none)."""

    reduce: Reduce = "graph"
    max_output_bytes: int = MAX_OUTPUT_BYTES
    absmin_everywhere: bool = False
    raw_below: int = RAW_BELOW


def collect_magnitudes(
    model: onnx.ModelProto | str | Path,
    *,
    calibration_data: str | Path | Mapping[str, np.ndarray] | None = None,
    feeds: Sequence[Feed] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    providers: Sequence[str] = ("cpu",),
    seed: int = 0,
    trt_plugins: Sequence[str] = (),
    base_dir: Path | None = None,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
    dynamic_default: int | None = None,
    reduce: Reduce = "graph",
) -> Magnitudes:
    """Run the model once per batch (random data, calibration data or `feeds`) and fold by abs-max.

    Random data sizes dynamic non-batch dims nobody gave in `input_shapes` with `dynamic_default` (castguard
    convert passes :data:`~harness.data.sizing.DYNAMIC_DEFAULT`); None refuses them, as the harness does.

    A path is loaded lazily (weights stay on disk); so may a ModelProto be, with `base_dir` its folder. `reduce`:
    "graph" reduces each tensor inside onnxruntime; "copy" (the former path) has onnxruntime return the tensors,
    at most about `max_output_bytes` of them per run, and reduces them in numpy. Both give the same figures.
    ``providers=["cuda:0"]`` runs on onnxruntime's CUDA provider, or on the CPU with one warning where it
    cannot start. See :func:`reference_run` for how the figures were obtained.
    """
    data = ReferenceData(
        calibration_data=calibration_data,
        input_shapes=input_shapes,
        providers=tuple(providers),
        trt_plugins=tuple(trt_plugins),
        seed=seed,
        dynamic_default=dynamic_default,
    )
    path = ReductionPath(reduce=reduce, max_output_bytes=max_output_bytes)
    return reference_run(model, data, feeds=feeds, base_dir=base_dir, path=path).magnitudes


@dataclass(frozen=True)
class ReferenceRun:
    """One reference run: its figures, and how they were obtained."""

    magnitudes: Magnitudes
    reduce: Reduce
    """The path that gave the figures ("copy" also after a fallback from "graph")."""
    copied: tuple[str, ...]
    """Tensors onnxruntime returned whole, reduced in numpy (on the graph path: those it could not reduce in-graph;
    small tensors, returned whole by choice, are not listed)."""
    providers: tuple[str, ...]
    """The execution providers the session ran on."""
    peak_rss_mb: float
    """The reference process's peak resident memory."""
    notes: tuple[str, ...] = ()
    """What was warned about: CUDA not used, the fallback to the copy path."""


class _ReductionRefused(Exception):
    """onnxruntime refused the added reductions (not the model): the copy path is tried instead."""


def reference_run(
    model: onnx.ModelProto | str | Path,
    data: ReferenceData,
    *,
    feeds: Sequence[Feed] | None = None,
    base_dir: Path | None = None,
    path: ReductionPath = ReductionPath(),
) -> ReferenceRun:
    """:func:`collect_magnitudes`, with the facts of the run (:class:`ReferenceRun`): the batches are ``feeds``,
    else ``data``'s calibration data, else random data as ``data`` says; ``path``: how the tensors are reduced."""
    if not isinstance(model, onnx.ModelProto):
        base_dir = Path(model).parent
        model = load_model(Path(model), weights="lazy")
    if feeds is not None:
        batches, source = [dict(f) for f in feeds], f"feeds ({len(feeds)} batches)"
    elif data.calibration_data is not None:
        batches, source = load_calibration(data.calibration_data, model)
    else:
        batches, source = random_feeds(
            model, seed=data.seed, input_shapes=data.input_shapes, dynamic_default=data.dynamic_default
        )
    if not batches:
        raise InputDataError(where="feeds", problem="no batches to run", fix="give at least one feed")
    if is_lazy(model) and base_dir is None:
        raise ValueError("collect_magnitudes: the model has external tensors; pass base_dir (their folder)")
    run = _Run(
        model=model,
        batches=batches,
        source=source,
        providers=provider_list(data.providers, data.trt_plugins),
        external_folder=base_dir if is_lazy(model) else None,
        path=path,
    )
    if path.reduce == "graph":
        try:
            return run.reference(reduced=True)
        except _ReductionRefused as refused:
            result = run.reference(reduced=False)  # the former path's own error where it fails too
            note = (
                f"onnxruntime refused the in-graph reductions of the reference run ({str(refused)[:300]}): every "
                f"tensor was copied out of onnxruntime instead (same figures, more time and memory)"
            )
            LOG.warning("%s", note)
            return ReferenceRun(
                magnitudes=result.magnitudes,
                reduce="copy",
                copied=result.copied,
                providers=result.providers,
                peak_rss_mb=result.peak_rss_mb,
                notes=(*result.notes, note),
            )
    return run.reference(reduced=False)


@dataclass(frozen=True)
class _Run:
    model: onnx.ModelProto
    batches: list[Feed]
    source: str
    providers: list[Provider]
    external_folder: Path | None
    path: ReductionPath

    def reference(self, *, reduced: bool) -> ReferenceRun:
        child = child_model(self.model, external_ok=self.external_folder is None)
        feeds = set(self.batches[0])
        names = [o.name for o in child.model.graph.output if o.name not in feeds]
        plan: ReductionPlan | None = None
        if reduced:
            facts = tensor_facts(child.model, self.batches[0])  # types, and sizes at the first batch's shapes
            small = [n for n in names if (size := facts.sizes.get(n)) is not None and size <= self.path.raw_below]
            try:
                plan = add_reductions(
                    child.model,
                    names,
                    facts=facts,
                    raw_names=small,
                    absmin_names=names if self.path.absmin_everywhere else denominators(self.model),
                )
            except ValueError as err:
                LOG.info("reference run: tensors copied out whole (%s)", err)
                child = child_model(self.model, external_ok=self.external_folder is None)
        if plan is None:
            groups = output_groups(child.model, max_output_bytes=self.path.max_output_bytes, feed=self.batches[0])
        else:
            sizes = {name: facts.sizes.get(name) for name in plan.raw}
            groups = pack(sizes, max_output_bytes=self.path.max_output_bytes)
            groups[:1] = [[*plan.outputs.values(), *(groups[0] if groups else [])]]
        unreduced = [name for name in plan.raw if name not in small] if plan is not None else []
        if unreduced:
            LOG.info(
                "reference run: %d tensor(s) copied out whole, their types unknown to onnx inference or not "
                "plain tensors: %s",
                len(unreduced),
                ", ".join(unreduced[:8]) + (" ..." if len(unreduced) > 8 else ""),
            )
        result = self._child_result(child, groups=groups, plan=plan)
        magnitudes = Magnitudes(
            absmax={k: float(v) for k, v in result["absmax"].items()},
            shapes={k: tuple(v) for k, v in result["shapes"].items()},
            dtypes={k: v for k, v in result["dtypes"].items() if v},
            data_source=self.source,
            batches=len(self.batches),
            absmin={k: float(v) for k, v in result["absmin"].items()},
        )
        notes: tuple[str, ...] = ()
        if result.get("note"):
            LOG.warning("%s", result["note"])
            notes = (str(result["note"]),)
        return ReferenceRun(
            magnitudes=magnitudes,
            reduce="graph" if plan is not None else "copy",
            copied=tuple(unreduced) if plan is not None else tuple(names),
            providers=tuple(result["providers"]),
            peak_rss_mb=float(result["peak_rss_mb"]),
            notes=notes,
        )

    def _child_result(
        self, child: ChildModel, *, groups: list[list[str]], plan: ReductionPlan | None
    ) -> dict[str, Any]:
        """Run refrun.py in a fresh process on `child` (external tensors of a lazy model are read from
        ``external_folder``, the model's own folder)."""
        batches, providers, source, external_folder = self.batches, self.providers, self.source, self.external_folder
        with scratch_folder(child.size) as work:
            model_path = child.write(work)
            batch_files = []
            for index, feed in enumerate(batches):
                path = work / f"batch{index}.npz"
                save_npz(path, feed)
                batch_files.append(str(path))
            available = [p[0] for p in providers]
            request = {
                "model": str(model_path),
                "providers": providers,
                "batches": batch_files,
                "groups": groups,
                "plan": plan.to_request() if plan is not None else None,
                "external_folder": str(external_folder.resolve()) if external_folder is not None else None,
            }
            try:
                result: dict[str, Any] = run_child(REFRUN, request, what="reference run", timeout_s=None).answer
            except ChildFailed as failed:
                raise crash_error(failed, f"{source} ({', '.join(available)})") from None
        if "error" in result:
            message = result["error"]
            if plan is not None and PREFIX in message:
                raise _ReductionRefused(message.strip())
            raise refused_error(message, stage=result["stage"], model=child.model, source=source)
        return result
