"""Input options in a run over several models: which ``--val-range``/``--input-shapes`` entries are a model's.

A night over many models mixes input names (``x`` for the CNNs, ``input_ids`` for the text models), while the
options are given once for the whole run. So, with more than one model, an entry that names an input applies
to the models that have an input of that name, and to no other; a range without a name applies to every input
of every model, and a model given its own file (``--inputs KEY=FILE``) takes none. An entry that no
model of the run has is still an error (a typo must not pass unseen): it is
checked over all the run's models, a shard's unassigned ones included. With one model nothing is scoped: that
model must have every named input, and :mod:`harness.data.recipes` says so when it has not.

A model's recipe then holds only its own entries, so its inputs id (and its golden's path) does not depend on
which other models share the run. No pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.core.errors import UserError

__all__ = ["InputOptions", "check_every_name_used"]

_SHOWN_INPUTS = 6


@dataclass(frozen=True)
class InputOptions:
    """The run's ``--val-range`` and ``--input-shapes`` entries (``""`` as a range's name: every input)."""

    val_ranges: tuple[tuple[str, float, float], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.val_ranges or self.input_shapes)

    def named(self) -> set[str]:
        """Every input name an entry gives."""
        return {name for name, _, _ in self.val_ranges if name} | {name for name, _ in self.input_shapes}

    def for_inputs(self, names: Sequence[str]) -> InputOptions:
        """The entries that apply to a model whose inputs are ``names``."""
        have = set(names)
        return InputOptions(
            val_ranges=tuple(r for r in self.val_ranges if not r[0] or r[0] in have),
            input_shapes=tuple(s for s in self.input_shapes if s[0] in have),
        )


def check_every_name_used(
    options: InputOptions,
    inputs: Mapping[str, Sequence[str]],
    *,
    more: Callable[[], Mapping[str, Sequence[str]]] | None = None,
    own_files: bool = False,
) -> None:
    """UserError naming each entry that no model has. ``inputs``: model key -> input names, for the models
    loaded; ``more`` gives the other models' (a shard's unassigned ones), asked only when a name is unused.
    Models with their own ``--inputs KEY=FILE`` take no entries and are left out of both (``own_files``: some
    are, which the message says)."""
    unused = options.named() - {name for names in inputs.values() for name in names}
    if not unused:
        return
    everything = dict(inputs)
    if more is not None:
        everything.update(more())
        unused -= {name for names in everything.values() for name in names}
    if not unused:
        return
    option = "--input-shapes" if unused & {name for name, _ in options.input_shapes} else "--val-range"
    listed = "; ".join(f"{key}: {_names(names)}" for key, names in sorted(everything.items()))
    files = " (the models with their own --inputs KEY=FILE take none)" if own_files else ""
    raise UserError(
        where=option,
        problem=f"no model of this run has an input named {', '.join(repr(n) for n in sorted(unused))}{files}",
        fix=f"name an input of one of the models ({listed})",
    )


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN_INPUTS])
    return shown + (f" and {len(names) - _SHOWN_INPUTS} more" if len(names) > _SHOWN_INPUTS else "") or "no inputs"
