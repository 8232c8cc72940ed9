"""Run AutoCast's own unit tests (NVIDIA Model-Optimizer, tests/unit/onnx/autocast/test_autocast.py) on castguard.

AutoCast's source is not part of castguard: this script reads the test file from a git snapshot of
Model-Optimizer (a bare git dir, e.g. the one the `fetch` tool gives for github:NVIDIA/Model-Optimizer) into a
temporary folder, serves the ``modelopt`` names the tests import from castguard (``harness.convert``), takes the two
model builders the tests use from ``tests/_test_utils/onnx/lib_test_models.py`` (only those two functions: the rest
of that file needs torch), and runs pytest there. It prints every test's outcome and the count.

Public API: the tests that use only ``convert_to_mixed_precision``, ``__main__.main/get_parser`` and
``modelopt.onnx.utils.get_opset_version``. Two tests call AutoCast internals castguard does not have
(``autocast.utils.setup_mappings``, ``convert.convert_to_f16``): they are run too and counted apart.

Needs onnx-graphsurgeon (the tests read dtypes through it): ``pip install onnx-graphsurgeon``.

    python benchmarks/autocast_unit_tests.py /work/.mirror/NVIDIA+Model-Optimizer/repo [--rev HEAD]
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TEST_FILE = "tests/unit/onnx/autocast/test_autocast.py"
BUILDERS_FILE = "tests/_test_utils/onnx/lib_test_models.py"
BUILDERS = ("build_conv_isinf_model", "build_conv_resize_model")
INTERNAL = ("test_setup_mappings", "test_convert_to_f16_falls_back_on_unresolvable_op")

SHIM = {
    "modelopt/__init__.py": "",
    "modelopt/onnx/__init__.py": "",
    "modelopt/onnx/utils.py": (
        "import onnx\n"
        "def get_opset_version(model):\n"
        "    return next(o.version for o in model.opset_import if o.domain in ('', 'ai.onnx'))\n"
        "def infer_shapes(model, **kw):\n"
        "    return onnx.shape_inference.infer_shapes(model)\n"
    ),
    "modelopt/onnx/autocast/__init__.py": "from harness.convert import convert_to_mixed_precision\n",
    "modelopt/onnx/autocast/__main__.py": "from harness.convert.cli import get_parser, main\n",
    "modelopt/onnx/autocast/utils.py": (
        "def setup_mappings(*a, **k):\n    raise NotImplementedError('AutoCast internal, not served by castguard')\n"
    ),
    "modelopt/onnx/autocast/convert.py": (
        "from harness.convert import convert_to_mixed_precision\n"
        "def convert_to_f16(*a, **k):\n"
        "    raise NotImplementedError('AutoCast internal entry point, not served by castguard')\n"
    ),
    "modelopt/onnx/autocast/logging_config.py": (
        "import logging\n"
        "def configure_logging(level='INFO'):\n"
        "    logging.getLogger('castguard').setLevel(getattr(logging, level))\n"
    ),
    "_test_utils/__init__.py": "",
    "_test_utils/onnx/__init__.py": "",
}


def git_show(git_dir: Path, rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(git_dir), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def builders_source(full: str) -> str:
    """Only the two builder functions (the file's other builders import torch)."""
    tree = ast.parse(full)
    lines = full.splitlines()
    parts = ["import numpy as np", "import onnx", "from onnx import helper", ""]
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in BUILDERS:
            parts.extend(lines[fn.lineno - 1 : fn.end_lineno])
            parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path, help="a git dir of NVIDIA/Model-Optimizer")
    parser.add_argument("--rev", default="HEAD")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="autocast-tests-") as tmp:
        root = Path(tmp)
        for rel, text in SHIM.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        (root / "_test_utils/onnx/lib_test_models.py").write_text(
            builders_source(git_show(args.git_dir, args.rev, BUILDERS_FILE))
        )
        (root / "test_autocast.py").write_text(git_show(args.git_dir, args.rev, TEST_FILE))
        (root / "conftest.py").write_text("")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "-rA",
                "--rootdir",
                str(root),
                "test_autocast.py",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            env={**_env(), "PYTHONPATH": f"{root}:{Path(__file__).resolve().parents[1]}"},
        )
    outcomes = {
        m.group(2): m.group(1)
        for m in re.finditer(r"^(PASSED|FAILED|ERROR) test_autocast\.py::(\S+)", proc.stdout, re.MULTILINE)
    }
    if not outcomes:
        print(proc.stdout[-4000:], proc.stderr[-4000:])
        return 2
    public = {k: v for k, v in outcomes.items() if k.split("[")[0] not in INTERNAL}
    for name, status in sorted(outcomes.items()):
        print(f"{status:7s} {name}{'  (AutoCast internal API)' if name.split('[')[0] in INTERNAL else ''}")
    passed = sum(v == "PASSED" for v in public.values())
    print(
        f"public API: {passed} of {len(public)} pass; all: "
        f"{sum(v == 'PASSED' for v in outcomes.values())} of {len(outcomes)}"
    )
    for line in proc.stdout.splitlines():
        if line.startswith(("FAILED", "E ")):
            print("  " + line[:300])
    return 0


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


if __name__ == "__main__":
    sys.exit(main())
