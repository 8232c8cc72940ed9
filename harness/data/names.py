"""Fresh tensor and node names for graphs castguard rewrites (the converter's Casts, emulate's rounding pairs)."""

from __future__ import annotations

__all__ = ["fresh_name"]


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``... whichever is not in ``taken``; the result is added to ``taken``."""
    name, counter = base, 0
    while name in taken:
        counter += 1
        name = f"{base}_{counter}"
    taken.add(name)
    return name
