"""``python -m harness.convert --onnx_path m.onnx``: the AutoCast-compatible command line."""

from __future__ import annotations

import sys

from harness.convert.cli import console

sys.exit(console())
