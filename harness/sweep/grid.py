"""The sweep grid: :class:`SweepSpec` -> :func:`expand` -> :class:`SweepPoint` objects with stable ids.

A case id (``fp16-dmax512-imax65504-excl_none-keepio0-emulate``) names goldens, report rows and
baselines, so it depends only on the case's settings, never on order or time.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from harness.convert.options import TARGETS as TARGETS
from harness.convert.plugins import CANDIDATE, OWN, check_converter, traits_of
from harness.core.dtypes import NODE_PRECISIONS as NODE_PRECISIONS
from harness.core.dtypes import PRECISIONS as PRECISIONS
from harness.core.errors import UserError
from harness.sweep.checks import check_choice, check_limit, check_node_precisions, check_runner, check_unique
from harness.sweep.exclusions import BUILTIN_EXCLUSIONS as BUILTIN_EXCLUSIONS  # check.py imports them from here
from harness.sweep.exclusions import ExclusionSet as ExclusionSet

if TYPE_CHECKING:
    from harness.convert.options import ConvertOptions

FP32_CASTS = ("respect", "ignore")
"""What a case does with the model's own Casts to FP32: keep their readers FP32, or convert them anyway."""
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.]")


def format_number(value: float) -> str:
    """``512.0`` -> ``512``, ``inf`` -> ``inf``, ``0.5`` -> ``0.5``, ``1e20`` -> ``1e20``: exact and id-safe."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if float(value).is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(float(value)).replace("e+", "e")


@dataclass(frozen=True)
class SweepPoint:
    """One point of the sweep: every setting that changes the converted model or where it runs."""

    precision: str = "fp16"
    data_max: float = 512.0
    init_max: float = 65504.0
    exclusion: ExclusionSet = ExclusionSet("none")
    keep_io_types: bool = False
    runner: str = "emulate"
    node_precisions: tuple[tuple[str, str], ...] = ()
    fp32_accumulation: bool = False
    target: str = "any"
    fp32_casts: str = "respect"
    """``respect`` the model's own Casts to FP32 (their readers stay FP32), or ``ignore`` them
    (``--ignore_fp32_casts``): a sweep dimension, so the trade-off is measured."""
    tuned: bool = False
    """A ``castguard tune`` case (``pytest --tune``): the plan that keeps the fewest nodes FP32 within the bound;
    ``data_max`` is then the low type's range, the start of the search."""
    converter: str = OWN
    """Who converts (``castguard.converters`` entry point), or ``candidate``: the user's own converted file."""
    candidate: str = ""
    """The ``candidate`` case's converted file (not part of the id: a model has at most one candidate)."""
    converter_options: tuple[tuple[str, str], ...] = ()
    """The converter's own options (``[tool.castguard.sweep.converter_options.NAME]``), sorted by key."""

    def __post_init__(self) -> None:
        check_converter(self.converter, where="SweepPoint.converter")
        check_choice(self.precision, PRECISIONS, where="SweepPoint.precision")
        check_choice(self.target, TARGETS, where="SweepPoint.target")
        check_choice(self.fp32_casts, FP32_CASTS, where="SweepPoint.fp32_casts")
        check_limit(self.data_max, where="SweepPoint.data_max")
        check_limit(self.init_max, where="SweepPoint.init_max")
        check_runner(self.runner, where="SweepPoint.runner")
        check_node_precisions(self.node_precisions, where="SweepPoint.node_precisions")

    @property
    def builtin_converter(self) -> bool:
        """castguard's own converter converts this case (in-process, cached by its options; a failure's diagnosis
        proposes fixes made with it): not a plugin's and not the user's candidate file."""
        return self.converter == OWN

    @property
    def id(self) -> str:
        """Readable, stable, unique per settings; node precisions, fp32 accumulation and a target other than
        ``any`` appear only when set."""
        if self.tuned:
            return "-".join([self.precision, "tuned", f"keepio{int(self.keep_io_types)}", self.runner])
        if self.converter == CANDIDATE:
            return f"{CANDIDATE}-{self.runner}"
        if not self.builtin_converter:
            return self._converter_id()
        parts = [
            self.precision,
            f"dmax{format_number(self.data_max)}",
            f"imax{format_number(self.init_max)}",
            f"excl_{self.exclusion.name}",
            f"keepio{int(self.keep_io_types)}",
            self.runner,
        ]
        if self.node_precisions:
            raw = "+".join(f"{key}.{prec}" for key, prec in self.node_precisions)
            token = "+".join(f"{_ID_UNSAFE.sub('_', key)}.{prec}" for key, prec in self.node_precisions)
            if token != raw:
                token += "_" + hashlib.sha256(raw.encode()).hexdigest()[:8]
            parts.append(f"np_{token}")
        if self.fp32_accumulation:
            parts.append("acc32")
        if self.target != "any":
            parts.append(f"tgt_{self.target}")
        if self.fp32_casts != "respect":
            parts.append(f"casts_{self.fp32_casts}")
        return "-".join(parts)

    def setting_parts(self) -> dict[str, str]:
        """Each sweep setting's id token (a setting at its default that is only shown when set maps to "")."""
        parts = {
            "precision": self.precision,
            "data_max": f"dmax{format_number(self.data_max)}",
            "init_max": f"imax{format_number(self.init_max)}",
            "exclusions": f"excl_{self.exclusion.name}",
            "keep_io_types": f"keepio{int(self.keep_io_types)}",
            "node_precisions": "",
            "fp32_accumulation": "acc32" if self.fp32_accumulation else "",
            "target": f"tgt_{self.target}" if self.target != "any" else "",
            "fp32_casts": f"casts_{self.fp32_casts}" if self.fp32_casts != "respect" else "",
        }
        if self.node_precisions:
            raw = "+".join(f"{key}.{prec}" for key, prec in self.node_precisions)
            parts["node_precisions"] = "np_" + hashlib.sha256(raw.encode()).hexdigest()[:8]
        return parts

    def _converter_id(self) -> str:
        """Another converter's case: its name, the settings it takes (in the sweep's order), the runner."""
        takes = traits_of(self.converter).takes
        parts = [token for name, token in self.setting_parts().items() if name in takes and token]
        own = [f"{_ID_UNSAFE.sub('_', k)}.{_ID_UNSAFE.sub('_', v)}" for k, v in self.converter_options]
        return "-".join([self.converter, *parts, *own, self.runner])

    def applied_settings(self) -> tuple[str, ...]:
        """The sweep settings this case's converter took (what the report says applied)."""
        takes = traits_of(self.converter).takes
        return tuple(name for name in self.setting_parts() if name in takes)

    def convert_options(self) -> ConvertOptions:
        """The converter settings of this case (the runner is not a converter setting)."""
        from harness.convert.options import ConvertOptions

        return ConvertOptions(
            low_precision_type=self.precision,
            op_types_to_exclude=self.exclusion.ops,
            data_max=self.data_max,
            init_max=self.init_max,
            keep_io_types=self.keep_io_types,
            node_precisions=self.node_precisions,
            fp32_accumulation=self.fp32_accumulation,
            target=self.target,
            respect_fp32_casts=self.fp32_casts == "respect",
        )


@dataclass(frozen=True)
class SweepSpec:
    """The grid; defaults are the documented 12-case sweep (why each axis: :mod:`harness.sweep.sources`). Each axis
    is a non-empty tuple without repeats."""

    precisions: tuple[str, ...] = PRECISIONS
    data_max: tuple[float, ...] = (8.0, 512.0, math.inf)  # tight, AutoCast default, rule off
    init_max: tuple[float, ...] = (65504.0,)
    exclusions: tuple[ExclusionSet, ...] = BUILTIN_EXCLUSIONS
    keep_io_types: tuple[bool, ...] = (False,)  # not swept by default: see harness.sweep.sources
    runners: tuple[str, ...] = ("emulate",)
    node_precisions: tuple[tuple[str, str], ...] = ()  # applies to every case; sorted by key
    fp32_accumulation: bool = False
    target: str = "any"  # applies to every case (convert --target)
    converters: tuple[str, ...] = (OWN,)  # settings a converter does not take are not swept for it
    converter_options: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # (converter, sorted options)
    fp32_casts: tuple[str, ...] = ("respect",)  # the model's own FP32 Casts: respect, ignore (not swept by default)

    def __post_init__(self) -> None:
        for axis in ("precisions", "data_max", "init_max", "exclusions", "keep_io_types", "runners", "fp32_casts"):
            values = getattr(self, axis)
            if not isinstance(values, tuple) or not values:
                raise UserError(
                    where=f"sweep {axis}", problem="the axis is empty or not a tuple", fix="give at least one value"
                )
        for precision in self.precisions:
            check_choice(precision, PRECISIONS, where="sweep precisions")
        for limit in self.data_max:
            check_limit(limit, where="sweep data_max")
        for limit in self.init_max:
            check_limit(limit, where="sweep init_max")
        for runner in self.runners:
            check_runner(runner, where="sweep runners")
        if not isinstance(self.converters, tuple) or not self.converters:
            raise UserError(
                where="sweep converters", problem="the axis is empty", fix='e.g. converters = ["castguard"]'
            )
        for converter in self.converters:
            check_converter(converter, where="sweep converters")
        for choice in self.fp32_casts:
            check_choice(choice, FP32_CASTS, where="sweep fp32_casts")
        for axis in ("precisions", "data_max", "init_max", "keep_io_types", "runners", "converters", "fp32_casts"):
            check_unique(getattr(self, axis), where=f"sweep {axis}")
        check_unique([s.name for s in self.exclusions], where="sweep exclusions")
        check_node_precisions(self.node_precisions, where="sweep node_precisions")
        check_choice(self.target, TARGETS, where="sweep target")

    @property
    def size(self) -> int:
        return math.prod(len(values) for values in self.axes().values())

    def axes(self) -> dict[str, tuple[Any, ...]]:
        """The swept axes in the grid's order, each under the :class:`SweepPoint` field its values set."""
        return {
            "precision": self.precisions,
            "data_max": self.data_max,
            "init_max": self.init_max,
            "exclusion": self.exclusions,
            "keep_io_types": self.keep_io_types,
            "runner": self.runners,
            "fp32_casts": self.fp32_casts,
        }


def expand(spec: SweepSpec) -> list[SweepPoint]:
    """Every case of the grid, in the spec's axis order, for each converter: a setting the converter does not
    take is held at its default (so it is not swept for it), and a precision it does not make is left out.
    Raises UserError if two distinct cases share an id."""
    cases: dict[str, SweepPoint] = {}
    for converter in spec.converters:
        for case in _grid(spec):
            fitted = _fit(case, converter, spec.converter_options)
            if fitted is not None:
                other = cases.setdefault(fitted.id, fitted)
                if other != fitted:
                    raise UserError(
                        where="sweep case ids",
                        problem=f"two different cases share the id {fitted.id!r}",
                        fix="rename an exclusion set or a node precision so their ids differ",
                    )
    return list(cases.values())


def _fit(
    case: SweepPoint, converter: str, options: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
) -> SweepPoint | None:
    """``case`` for ``converter``: settings it does not take at their defaults; None for a precision it lacks."""
    if converter == OWN:
        return case
    traits = traits_of(converter)
    if "precision" not in traits.takes:
        case = replace(case, precision=traits.precisions[0])  # the same case for every precision: one id
    elif case.precision not in traits.precisions:
        return None
    default = SweepPoint()
    held = {
        "data_max": "data_max",
        "init_max": "init_max",
        "exclusions": "exclusion",
        "keep_io_types": "keep_io_types",
        "node_precisions": "node_precisions",
        "fp32_accumulation": "fp32_accumulation",
        "target": "target",
        "fp32_casts": "fp32_casts",
    }
    changes = {attr: getattr(default, attr) for setting, attr in held.items() if setting not in traits.takes}
    return replace(case, converter=converter, converter_options=dict(options).get(converter, ()), **changes)


def _grid(spec: SweepSpec) -> list[SweepPoint]:
    axes = spec.axes()
    return [
        SweepPoint(
            **dict(zip(axes, values)),
            node_precisions=spec.node_precisions,
            fp32_accumulation=spec.fp32_accumulation,
            target=spec.target,
        )
        for values in itertools.product(*axes.values())
    ]
