"""The input options as the command that shows a hint spells them, so that a hint names only flags its reader
can pass (issue 34 item 8).

The feed rules (:mod:`harness.data.recipes`) are shared by ``pytest --model`` and by ``castguard convert``/``tune``
(their reference data), but the options differ: pytest has ``--val-range``, ``--inputs`` and ``--input-shapes``;
convert and tune have no value range, take real data as ``--calibration_data`` and sizes as ``--input_shapes``.
An :class:`InputFlags` travels with the recipe and words the hints.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputFlags:
    """How a command spells its input options; ``val_range`` is None where it has none."""

    inputs_file: str
    input_shapes: str
    val_range: str | None

    def range_fix(self, name: str) -> str:
        """Give ``name`` a range (where the command can) or real values."""
        if self.val_range is None:
            return f"pass real values with {self.inputs_file} FILE.npz"
        return f"set {self.val_range} {name}:[lo,hi] or pass {self.inputs_file} FILE"

    def real_values_fix(self, name: str) -> str:
        """Pass real values; a range only where the command has one and every value in it is valid."""
        if self.val_range is None:
            return f"pass the real values with {self.inputs_file} FILE.npz"
        return (
            f"pass the real values with {self.inputs_file} FILE.npz (or {self.val_range} {name}:[lo,hi] if "
            "every value in that range is valid)"
        )

    def default_range_note(self) -> str:
        """What changes the default float range."""
        return f"{self.val_range} to change" if self.val_range else f"{self.inputs_file} for real data"


PYTEST_FLAGS = InputFlags(inputs_file="--inputs", input_shapes="--input-shapes", val_range="--val-range")
CONVERT_FLAGS = InputFlags(inputs_file="--calibration_data", input_shapes="--input_shapes", val_range=None)
