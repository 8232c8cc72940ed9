"""The :class:`Checker`: cases of any model run through the suite's session (see :mod:`harness.check`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypedDict, Union

from harness.check.result import CheckResult, golden_written
from harness.config import HarnessConfig
from harness.core.errors import RunnerUnavailable, UserError
from harness.core.files import own_folder
from harness.data.feedfiles import Batch, write_feeds
from harness.data.goldens import Golden
from harness.pipeline.session import AccuracySession, Case, SessionRole
from harness.report import CaseRecord
from harness.runners.options import RunnerOptionsTable, merge_options, parse_runner_options
from harness.sweep import SweepPoint
from harness.sweep.grid import BUILTIN_EXCLUSIONS, ExclusionSet

Inputs = Union[str, "os.PathLike[str]", Batch, Sequence[Batch], None]
"""A file or folder ``--inputs`` accepts, one feed, a sequence of feeds (one iteration each), or None (the
project's input options, else random data as ``pytest --model``)."""


class CheckSettings(TypedDict, total=False):
    """The settings :meth:`Checker.check` takes after the model (their defaults are there); the ``castguard``
    fixture passes them on as given."""

    precision: str
    data_max: float
    init_max: float
    exclusions: str
    keep_io_types: bool
    runner: str | None
    inputs: Inputs
    key: str | None
    converter: str
    candidate: str | os.PathLike[str] | None
    runner_options: Mapping[str, Mapping[str, object]] | None


class SweepSettings(TypedDict, total=False):
    """The settings :meth:`Checker.sweep` takes after the model (their defaults are there)."""

    precisions: Iterable[str]
    data_max: Iterable[float]
    init_max: Iterable[float]
    exclusions: Iterable[str]
    keep_io_types: Iterable[bool]
    runners: Iterable[str] | None
    inputs: Inputs
    key: str | None
    runner_options: Mapping[str, Mapping[str, object]] | None


class Checker:
    """Runs cases of any model with one project's configuration (see the module docstring)."""

    def __init__(
        self,
        config: HarnessConfig,
        *,
        output_dir: Path,
        bundled_dir: Path,
        on_record: Callable[[CaseRecord], None] | None = None,
        strict_provenance: bool = False,
    ) -> None:
        self.config = config
        self.output_dir = output_dir
        self.bundled_dir = bundled_dir
        self.on_record = on_record
        self.strict_provenance = strict_provenance
        self._sessions: dict[tuple[str, str, RunnerOptionsTable], AccuracySession] = {}
        self._fp32_checked: dict[tuple[str, str], CheckResult | None] = {}

    def check(
        self,
        model: str | os.PathLike[str],
        *,
        precision: str = "fp16",
        data_max: float = 512.0,
        init_max: float = 65504.0,
        exclusions: str = "none",
        keep_io_types: bool = False,
        runner: str | None = None,
        inputs: Inputs = None,
        key: str | None = None,
        converter: str = "castguard",
        candidate: str | os.PathLike[str] | None = None,
        runner_options: Mapping[str, Mapping[str, object]] | None = None,
    ) -> CheckResult:
        """Convert ``model`` with these settings (``converter``: any of ``castguard.converters``), run it on
        ``runner`` (default: the project's first sweep runner) and compare with its FP32 golden on ``inputs``.
        ``candidate``: judge that converted file instead (the conversion settings do not apply).
        ``runner_options={NAME: {key: value}}`` go to runner plugin NAME, over ``[tool.castguard] runner_options``."""
        if candidate is not None:
            return self.check_candidate(
                model, candidate, runner=runner, inputs=inputs, key=key, runner_options=runner_options
            )
        case = SweepPoint(
            converter=converter,
            precision=precision,
            data_max=float(data_max),
            init_max=float(init_max),
            exclusion=self._exclusion(exclusions),
            keep_io_types=keep_io_types,
            runner=runner if runner is not None else self.config.runners[0],
        )
        return self.run_cases(model, [case], inputs=inputs, key=key, runner_options=runner_options)[0]

    def check_candidate(
        self,
        model: str | os.PathLike[str],
        candidate: str | os.PathLike[str],
        *,
        runner: str | None = None,
        inputs: Inputs = None,
        key: str | None = None,
        runner_options: Mapping[str, Mapping[str, object]] | None = None,
    ) -> CheckResult:
        """Judge ``candidate`` (a model the user converted) against ``model``'s FP32 golden on ``runner``."""
        from harness.convert.dispatch import check_candidate
        from harness.convert.plugins import CANDIDATE

        session, name = self._session(model, inputs=inputs, key=key, runner_options=self._options(runner_options))
        loaded = session.models[name]
        path = Path(self._model_ref(candidate)).resolve()
        precision = check_candidate(loaded.model, loaded.spec.path, path)
        case = SweepPoint(
            converter=CANDIDATE,
            candidate=str(path),
            precision=precision,
            runner=runner if runner is not None else self.config.runners[0],
        )
        return self.run_cases(model, [case], inputs=inputs, key=key)[0]

    def sweep(
        self,
        model: str | os.PathLike[str],
        *,
        precisions: Iterable[str] = ("fp16", "bf16"),
        data_max: Iterable[float] = (512.0,),
        init_max: Iterable[float] = (65504.0,),
        exclusions: Iterable[str] = ("none",),
        keep_io_types: Iterable[bool] = (False,),
        runners: Iterable[str] | None = None,
        inputs: Inputs = None,
        key: str | None = None,
        runner_options: Mapping[str, Mapping[str, object]] | None = None,
    ) -> list[CheckResult]:
        """Every combination of the given settings, in order (precision slowest); one result per case."""
        cases = [
            SweepPoint(
                precision=p,
                data_max=float(d),
                init_max=float(i),
                exclusion=self._exclusion(e),
                keep_io_types=k,
                runner=r,
            )
            for p in precisions
            for d in data_max
            for i in init_max
            for e in exclusions
            for k in keep_io_types
            for r in (runners if runners is not None else self.config.runners)
        ]
        return self.run_cases(model, cases, inputs=inputs, key=key, runner_options=runner_options)

    def run_cases(
        self,
        model: str | os.PathLike[str],
        cases: Sequence[SweepPoint],
        *,
        inputs: Inputs,
        key: str | None,
        runner_options: Mapping[str, Mapping[str, object]] | None = None,
    ) -> list[CheckResult]:
        session, name = self._session(model, inputs=inputs, key=key, runner_options=self._options(runner_options))
        blocked = self._fp32(session, name)
        if blocked is not None:
            return [replace(blocked, case=case) for case in cases]
        return [self._case(session, Case(name, case)) for case in cases]

    # -- internals ------------------------------------------------------------------------------------------
    def _exclusion(self, name: str) -> ExclusionSet:
        known = {s.name: s for s in (*BUILTIN_EXCLUSIONS, *self.config.sweep.exclusions)}
        if name not in known:
            raise UserError(
                where=f"exclusions={name!r}",
                problem="no such exclusion set",
                fix=f"use one of: {', '.join(known)} (or define it in [tool.castguard.sweep.exclusion_sets])",
            )
        return known[name]

    def _options(self, runner_options: Mapping[str, Mapping[str, object]] | None) -> RunnerOptionsTable:
        """The project's runner options, with those given to this call over them."""
        table = self.config.runner_options
        if runner_options:
            table = merge_options(table, parse_runner_options(runner_options, where="runner_options="))
        return table

    def _session(
        self, model: str | os.PathLike[str], *, inputs: Inputs, key: str | None, runner_options: RunnerOptionsTable
    ) -> tuple[AccuracySession, str]:
        ref = self._model_ref(model)
        if key is not None:
            ref = f"{key}={ref}"
        options: dict[str, object] = {}
        inputs_key = ""
        if inputs is not None:
            path = self._inputs_file(inputs)
            options = {"inputs_file": path, "val_ranges": (), "input_shapes": ()}
            inputs_key = str(path)
        where = (ref, inputs_key, runner_options)
        if where not in self._sessions:
            config = replace(
                self.config,
                models=(ref,),
                model_inputs=(),
                shard=None,
                tune=False,
                runner_options=runner_options,
                **options,  # type: ignore[arg-type]
            )
            try:
                role = SessionRole(suite=False, output_dir=self.output_dir, strict_provenance=self.strict_provenance)
                self._sessions[where] = AccuracySession.open(config, bundled_dir=self.bundled_dir, role=role)
            except UserError as err:
                if not in_memory(inputs) or err.where != inputs_key:
                    raise
                raise UserError(
                    where=f"inputs= of check({os.fspath(model)!r}) (your feeds, saved as {inputs_key})",
                    problem=err.problem,
                    fix="give feeds that match the model's inputs",
                ) from None
        session = self._sessions[where]
        return session, next(iter(session.models))

    def _model_ref(self, model: str | os.PathLike[str]) -> str:
        """A path relative to the project folder (where pyproject.toml is) or a bundled model's name."""
        text = os.fspath(model)
        candidate = self.config.project / text
        if not Path(text).is_absolute() and candidate.exists():
            return str(candidate)
        return text

    def _inputs_file(self, inputs: Inputs) -> Path:
        if isinstance(inputs, (str, os.PathLike)):
            path = Path(inputs)
            return path if path.is_absolute() else self.config.project / path
        assert inputs is not None
        feeds = [inputs] if isinstance(inputs, Mapping) else list(inputs)
        return write_feeds(feeds, folder=own_folder(self.config.cache_dir) / "check-inputs")

    def _fp32(self, session: AccuracySession, name: str) -> CheckResult | None:
        """The FP32 golden check, once per model and inputs. A golden written in this run (missing, or
        --update-goldens; every xdist worker of the run knows it from the sidecar's ``written_in_run``) fails every
        check of the model in this run, whatever the order or the worker: nothing is compared against a golden
        nobody has reviewed. FP32 that no longer reproduces its golden fails every check of the model too."""
        loaded = session.models[name]
        where = (name, loaded.recipe.id)
        if where not in self._fp32_checked:
            path = session.store.path_for(loaded.spec, loaded.recipe)
            was_there = path.is_file()
            existed = was_there and not self.config.update_goldens
            outcome = session.check_fp32_golden(name)
            result: CheckResult | None
            if outcome.status != "pass" and existed:  # FP32 no longer reproduces the golden: every check fails
                result = CheckResult(model=name, case=None, status="fail", message=outcome.message)
            else:
                golden, _ = session.golden(name, allow_update=False)
                rewritten = self.config.update_goldens and outcome.status != "pass"  # identical: left alone
                new = not was_there or rewritten or _written_in(golden, session.run_id)
                result = golden_written(name, path, golden, loaded.recipe.id) if new else None
            self._fp32_checked[where] = result
        return self._fp32_checked[where]

    def recording(self, on_record: Callable[[CaseRecord], None]) -> Checker:
        """This checker with its records going to ``on_record``; the per-model sessions (goldens, magnitudes,
        converted models) are shared."""
        view = Checker(
            self.config,
            output_dir=self.output_dir,
            bundled_dir=self.bundled_dir,
            on_record=on_record,
            strict_provenance=self.strict_provenance,
        )
        view._sessions, view._fp32_checked = self._sessions, self._fp32_checked
        return view

    def _case(self, session: AccuracySession, sweep_case: Case) -> CheckResult:
        try:
            outcome = session.check_low_precision(sweep_case)
        except RunnerUnavailable as err:
            return CheckResult(model=sweep_case.model, case=sweep_case.case, status="skip", message=str(err))
        if outcome.record is not None and self.on_record is not None:
            self.on_record(outcome.record)
        return CheckResult(
            model=sweep_case.model,
            case=sweep_case.case,
            status=outcome.status,
            message=outcome.message,
            record=outcome.record,
        )


def in_memory(inputs: Inputs) -> bool:
    """Feeds given as arrays (not a file or folder)."""
    return inputs is not None and not isinstance(inputs, (str, os.PathLike))


def _written_in(golden: Golden, run_id: str | None) -> bool:
    return run_id is not None and golden.meta.get("written_in_run") == run_id
