"""Every domain module of ``harness`` imports with pytest blocked (only ``harness.plugin`` may use pytest)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import importlib, importlib.abc, pkgutil, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pytest", "_pytest", "pluggy"):
                raise ImportError(f"{name} is blocked: domain code must not import pytest")
            return None

    sys.meta_path.insert(0, Block())
    import harness
    names = [m.name for m in pkgutil.walk_packages(harness.__path__, "harness.")
             if m.name != "harness.plugin" and not m.name.startswith("harness.plugin.")
             and not m.name.endswith("__main__")]
    for name in names:
        importlib.import_module(name)
    print(len(names))
""")


def test_domain_modules_import_without_pytest() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) >= 15
