"""``python -m harness.adversarial replay FILE.npz`` (old findings' command) -> ``castguard replay FILE.npz``."""

from __future__ import annotations

import sys

from harness.cli import main

sys.exit(main(sys.argv[1:]))
