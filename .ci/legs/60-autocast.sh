#!/usr/bin/env bash
# CI leg: the `autocast` converter for real. A fresh venv installs castguard[autocast] (NVIDIA ModelOpt's ONNX
# extra: torch, onnxslim, onnxscript, lief; never a runtime dependency of castguard) and runs
# tests/integration/test_autocast.py on the bundled BERT-like export: an autocast case's converted model equals
# `python -m modelopt.onnx.autocast`'s file with the same arguments and calibration data (nodes, types,
# initializers), and its verdict equals castguard's verdict on that file given as --candidate. The test file
# skips without modelopt, so "skipped" here is a failure. Newest Python only, in
# "$CASTGUARD_CI_VENV_BASE-autocast"; bounded by `timeout` (10 minutes for the tests; about 3 minutes here).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../netretry.sh"   # with_retries, pip retry settings
root="$(pwd)"
python="${CASTGUARD_CI_PYTHON:-python3}"
venv="${CASTGUARD_CI_VENV_BASE:-$root/.ci-venv}-autocast"
fail() { echo "leg autocast: FAILED - $*" >&2; exit 1; }
echo "leg autocast: $python; $(df -h --output=avail "$root" | tail -n 1 | tr -d ' ') free (the install takes about 7 GB)"

rm -rf "$venv"
"$python" -m venv "$venv" || fail "cannot make $venv"
with_retries "$venv/bin/python" -m pip install --quiet --upgrade pip
with_retries timeout 1200 "$venv/bin/python" -m pip install --quiet --no-cache-dir -e "$root[autocast,dev]" || fail "pip install -e '.[autocast,dev]' failed"
"$venv/bin/python" -c "import modelopt.onnx.autocast, importlib.metadata as m; print('nvidia-modelopt', m.version('nvidia-modelopt'))" \
    || fail "modelopt.onnx.autocast does not import after installing castguard[autocast]"
timeout 600 "$venv/bin/python" -m pytest -p no:cacheprovider -p no:randomly -q -rs tests/integration/test_autocast.py > autocast.log 2>&1
code=$?
tail -5 autocast.log
[ "$code" -eq 0 ] || fail "tests/integration/test_autocast.py exited $code"
grep -q "skipped" autocast.log && fail "a test skipped with modelopt installed"
grep -q "3 passed" autocast.log || fail "not all three autocast tests passed"
rm -f autocast.log
echo "leg autocast: ok"
