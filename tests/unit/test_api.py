"""The declared public API (``harness.__all__``): every name resolves, lazily, to its home module's object."""

from __future__ import annotations

import subprocess
import sys

import harness


def test_every_public_name_resolves_to_its_home_object() -> None:
    for name in harness.__all__:
        value = getattr(harness, name)
        if name != "__version__":
            module, _, attr = harness._API[name].partition(":")
            home = __import__(module, fromlist=[attr or name])
            assert value is getattr(home, attr or name), name


def test_import_harness_is_cheap_and_unknown_names_fail() -> None:
    code = (
        "import sys, harness; heavy = [m for m in ('onnxruntime', 'hypothesis', 'onnx') if m in sys.modules];"
        " print(heavy); harness.nope"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]"
    assert "module 'harness' has no attribute 'nope'" in proc.stderr
