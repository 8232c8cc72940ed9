#!/usr/bin/env bash
# Leg: the bundled mnist (trained in numpy, test_models/build.py) retrains byte for byte from its builder, so the
# committed model, its digits and its golden are what the code makes, not a file nobody can reproduce.
# That holds only for the numpy release that trained it (test_models.build.MNIST_NUMPY, on x86-64): the main
# legs resolve other numpy releases (2.2 on Python 3.10, 2.5 on 3.13), where the test skips and says why. Here a
# fresh venv pins that release and the test must pass, not skip. About a minute (mnist trains in ~10 s).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../netretry.sh"   # with_retries, pip retry settings

venv="${CASTGUARD_CI_VENV_BASE:-$PWD/.ci-venv}-mnist"
python="${CASTGUARD_CI_PYTHON:-python3}"
release="$("$python" -c 'import sys; sys.path.insert(0, "."); import ast, pathlib
tree = ast.parse(pathlib.Path("test_models/build.py").read_text())
print(next(n.value.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "MNIST_NUMPY"))')"
rm -rf "$venv"
"$python" -m venv "$venv"
with_retries "$venv/bin/python" -m pip install --quiet --upgrade pip
with_retries "$venv/bin/python" -m pip install --quiet -e ".[dev]" "numpy==$release.*"
echo "50-mnist-rebuild: numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)') (the release that trained mnist: $release)"
log="$(mktemp)"
set +e
(export CI=true PATH="$venv/bin:$PATH"; pytest -m slow -p no:cacheprovider -q -rs \
    "tests/unit/data/test_bundled_models.py::test_mnist_retrains_byte_identical") > "$log" 2>&1
status=$?
set -e
tail -n 5 "$log"
if [ "$status" -ne 0 ] || ! grep -q "1 passed" "$log"; then
    echo "50-mnist-rebuild: FAILED - the committed mnist does not retrain byte for byte (pytest exit $status)" >&2
    exit 1
fi
echo "50-mnist-rebuild: ok"
