#!/usr/bin/env bash
# CI leg: castguard with exactly the declared minimum of every runtime dependency, on the oldest Python.
# `[project] dependencies` in pyproject.toml become a pip constraints file of `name==floor` (.ci/floors.py), and
# castguard's wheel is installed under it (pip fails when two floors cannot coexist). Checks, from an empty folder
# whose path has a space, with no castguard extras (dev, trt) installed:
#   - every dependency is installed at exactly its floor;
#   - the README's quick start: pytest --model mnist.onnx writes the golden (exit 1, by design), then the sweep
#     passes (exit 0), bf16 cases included (the default sweep has fp16 and bf16: both must pass);
#   - castguard convert --low_precision_type bf16 on mnist writes a model onnx.checker accepts.
# Fresh venv "$CASTGUARD_CI_VENV_BASE-floors" from CASTGUARD_CI_OLDEST_PYTHON. A floor that fails here is raised in
# pyproject.toml (or the code fixed), never papered over here.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../netretry.sh"   # with_retries, pip retry settings
root="$(pwd)"
python="${CASTGUARD_CI_OLDEST_PYTHON:-${CASTGUARD_CI_PYTHON:-python3}}"
reader="${CASTGUARD_CI_PYTHON:-python3}"   # reads pyproject.toml with tomllib (3.11+)
version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    || { echo "leg floors: FAILED - $python does not run" >&2; exit 1; }
venv="${CASTGUARD_CI_VENV_BASE:-$root/.ci-venv}-floors"
fail() { echo "leg floors (Python $version): FAILED - $*" >&2; exit 1; }
echo "leg floors: Python $version ($python)"

work="$(mktemp -d)/an empty folder"
mkdir -p "$work" || fail "no scratch folder"
"$reader" "$root/.ci/floors.py" "$root/pyproject.toml" > "$work/../floors.txt" || fail "cannot read the floors"
echo "leg floors: constraints:"; sed 's/^/    /' "$work/../floors.txt"
rm -rf "$venv"
"$python" -m venv "$venv" || fail "cannot make $venv"
with_retries "$venv/bin/python" -m pip install --quiet --upgrade pip
with_retries "$venv/bin/python" -m pip install --quiet --constraint "$work/../floors.txt" "$root" \
    || fail "pip cannot install castguard with every dependency at its floor (two floors conflict?)"
"$venv/bin/python" -m pip check || fail "pip check: broken requirements at the floors"
"$venv/bin/python" - "$work/../floors.txt" <<'PY' || fail "a dependency is not at its floor"
import sys
from importlib.metadata import version

def release(text):  # "1.24" and "1.24.0" are the same release
    parts = [int(p) for p in text.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return parts

for line in open(sys.argv[1]):
    requirement, _, marker = line.strip().partition(";")
    if marker and not eval(marker.strip().replace("python_version", repr("%d.%d" % sys.version_info[:2]))):
        continue
    name, _, pinned = requirement.strip().partition("==")
    have = version(name)
    print(f"    {name} {have}")
    assert release(have) == release(pinned), f"{name} {have} installed, floor {pinned}"
PY
export PATH="$venv/bin:$PATH"
cd "$work" || fail "no scratch folder"

pytest --model mnist.onnx -p no:cacheprovider -q > first.log 2>&1
code=$?
grep -q "golden written" first.log || { tail -30 first.log; fail "the first run did not write the golden (exit $code)"; }
pytest --model mnist.onnx -p no:cacheprovider -v > second.log 2>&1
code=$?
[ "$code" -eq 0 ] || { tail -40 second.log; fail "pytest --model mnist.onnx exited $code"; }
grep -q "test_low_precision\[mnist-bf16-.*PASSED" second.log || { tail -40 second.log; fail "no bf16 case passed"; }
grep -q "test_low_precision\[mnist-fp16-.*PASSED" second.log || { tail -40 second.log; fail "no fp16 case passed"; }
tail -1 second.log

castguard convert --onnx_path "$root/test_models/mnist/mnist.onnx" --low_precision_type bf16 --output_path "$work/mnist.bf16.onnx" \
    > convert.log 2>&1 || { tail -20 convert.log; fail "castguard convert bf16 failed"; }
python -c "import onnx, sys; onnx.checker.check_model(sys.argv[1], full_check=True)" "$work/mnist.bf16.onnx" \
    || fail "castguard convert bf16 wrote an invalid model"
echo "leg floors (Python $version): ok"
