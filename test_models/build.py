"""Rebuild every bundled artifact, byte for byte: ``python -m test_models.build``.

    python -m test_models.build                 # rebuild all models (mnist trains for ~10 s)
    python -m test_models.build needs_constraints explicit_typing
    python -m test_models.build --check         # exit 1 if a rebuild would change a committed file

For a reproducible mnist training, ``main`` pins the arithmetic before numpy is
imported: one BLAS thread, OpenBLAS's Haswell (AVX2) kernels and numpy's AVX2
code paths (its AVX-512 dispatch disabled), so any x86-64 machine with AVX2
computes the same bits. Other CPUs (e.g. aarch64) or other numpy/OpenBLAS
releases may train to slightly different weights; ``--check`` then reports the
files that would change.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import test_models

REPRODUCIBLE_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512F AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR",
}
X86_ENV = {"OPENBLAS_CORETYPE": "Haswell"}
MNIST_NUMPY = "2.4"
"""The numpy release (major.minor) that trained the committed mnist, on x86-64 with the pinned arithmetic above
(checked with numpy 2.4.6). Others train other bits: numpy 2.2 (the newest for Python 3.10) and 2.5 both report
"would change: test_models/mnist/mnist.onnx"."""


def why_mnist_cannot_reproduce() -> str | None:
    """Why this interpreter cannot retrain the committed mnist byte for byte (None: it can)."""
    import numpy as np

    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return f"the committed mnist was trained on x86-64 (OpenBLAS Haswell kernels); this machine is {machine}"
    here = ".".join(np.__version__.split(".")[:2])
    if here != MNIST_NUMPY:
        return (
            f"the committed mnist was trained with numpy {MNIST_NUMPY}; numpy {np.__version__} computes other "
            f"bits, so byte identity cannot be checked here (run it with pip install 'numpy=={MNIST_NUMPY}.*')"
        )
    return None


def pin_arithmetic() -> None:
    """Set :data:`REPRODUCIBLE_ENV` for numpy and OpenBLAS; they read it when numpy is first imported."""
    if "numpy" in sys.modules:
        print(
            "note: numpy was imported before the arithmetic could be pinned; "
            "mnist may not reproduce the committed bytes",
            file=sys.stderr,
        )
    os.environ.update(REPRODUCIBLE_ENV)
    if platform.machine().lower() in ("x86_64", "amd64"):
        os.environ.update(X86_ENV)


def small_model_artifacts(name: str) -> dict[Path, bytes]:
    from test_models.artifacts import onnx_bytes
    from test_models.small_models import BUILDERS

    entry = test_models.MODELS[name]
    return {entry.path: onnx_bytes(BUILDERS[name]())}


def mnist_artifacts(*, log: bool = True) -> dict[Path, bytes]:
    """Train the CNN, export it and pick the ten sample digits; the .npz files are made from the .pgm bytes."""
    import numpy as np

    from test_models import mnist_train
    from test_models.artifacts import npz_bytes, onnx_bytes, pgm_bytes

    start = time.perf_counter()
    trained, data = mnist_train.train_and_export()
    if trained.test_accuracy < 0.95:
        raise RuntimeError(f"mnist reached only {trained.test_accuracy:.2%} test accuracy (need >= 95%)")
    entry = test_models.MODELS["mnist"]
    pgms = [data.pgm_test[i] for i in trained.sample_indices]
    files: dict[Path, bytes] = {entry.path: onnx_bytes(trained.model)}
    files.update({entry.folder / f"{digit}.pgm": pgm_bytes(img) for digit, img in enumerate(pgms)})
    digits = mnist_train.model_input(np.stack(pgms))
    files[entry.folder / "digits.npz"] = npz_bytes(Input3=digits)
    files[entry.folder / "8.npz"] = npz_bytes(Input3=digits[8:9])
    if log:
        print(
            f"mnist: {len(data.y_train)} train / {len(data.y_test)} test images, "
            f"test accuracy {trained.test_accuracy:.2%} (onnxruntime), "
            f"trained in {time.perf_counter() - start:.1f} s"
        )
        print(
            "mnist: activation absmax over the test split: "
            + ", ".join(f"{k}={v:.3g}" for k, v in trained.activation_absmax.items())
        )
    return files


def artifacts(name: str) -> dict[Path, bytes]:
    """Every file the named bundled model owns, as the builder makes it now."""
    if name == "mnist":
        return mnist_artifacts()
    return small_model_artifacts(name)


def main(argv: Sequence[str] | None = None) -> int:
    pin_arithmetic()
    from test_models.artifacts import write_if_changed

    parser = argparse.ArgumentParser(prog="python -m test_models.build", description=__doc__.splitlines()[0])
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help=f"models to rebuild (default: all of {', '.join(test_models.built_names())})",
    )
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if any file would change")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(test_models.names()))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; bundled models are {', '.join(test_models.names())}")
    exported = sorted(set(args.models) - set(test_models.built_names()))
    if exported:
        parser.error(
            f"{', '.join(exported)}: made by `python -m {test_models.MODELS[exported[0]].made_by}` "
            "(needs torch), not by this script"
        )
    changed: list[Path] = []
    for name in args.models or test_models.built_names():
        for path, data in artifacts(name).items():
            if args.check:
                if not path.is_file() or path.read_bytes() != data:
                    changed.append(path)
            elif write_if_changed(path, data):
                changed.append(path)
    root = test_models.bundled_dir()
    verb = "would change" if args.check else "written"
    for path in changed:
        print(f"{verb}: {path.relative_to(root.parent)}")
    if not changed:
        print("all bundled artifacts are up to date")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
