"""A package's names imported on first use (PEP 562): the package itself stays cheap to import, and each name loads
its module when it is first read, so that a run imports only the parts it uses (a warm sweep neither AutoCast's
function nor the tuning engine). Static checkers see the names through the package's ``TYPE_CHECKING`` imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, api: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of `package`: each name of `api` (name -> its submodule) imported on first use."""

    def getattr_(name: str) -> Any:
        if name not in api:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{api[name]}"), name)

    return getattr_
