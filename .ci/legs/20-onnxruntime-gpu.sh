#!/usr/bin/env bash
# CI leg: castguard with onnxruntime-gpu instead of onnxruntime, installed with the README's line for GPU users,
# on this CPU-only machine (the wheel installs without a GPU; its CUDA provider cannot load here). Before
# castguard 0.1.1 every bf16 conversion died here with a segfault (exit 139): onnxruntime's private
# get_all_opkernel_def() loads every provider library. Checks, from an empty folder whose path has a space:
#   - castguard convert, fp16 and bf16, on every bundled model: exit 0 and a model onnx.checker accepts;
#   - pytest --model mnist.onnx: the golden is written (exit 1, by design), then the sweep passes (exit 0);
#   - pytest --model mnist.onnx --runner ort-cuda: every case skips, naming the missing CUDA library; a runner
#     asked for by name that only skipped fails the run (exit 1, the reason said once), and exit 0 with
#     --allow-skipped-runner.
# No step may die by a signal. It runs on the oldest and the newest Python (CASTGUARD_CI_OLDEST_PYTHON,
# CASTGUARD_CI_PYTHON), each in a fresh venv "$CASTGUARD_CI_VENV_BASE-ortgpu-<python version>".
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../netretry.sh"   # with_retries, pip retry settings
root="$(pwd)"
if [ -z "${LEG_ORTGPU_PYTHON:-}" ]; then   # once per Python, the same interpreter once
    newest="${CASTGUARD_CI_PYTHON:-python3}"
    oldest="${CASTGUARD_CI_OLDEST_PYTHON:-$newest}"
    for python in "$oldest" "$newest"; do
        LEG_ORTGPU_PYTHON="$python" bash "${BASH_SOURCE[0]}" || exit 1
        [ "$oldest" = "$newest" ] && break
    done
    exit 0
fi
python="$LEG_ORTGPU_PYTHON"
version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    || { echo "leg onnxruntime-gpu: FAILED - $python does not run" >&2; exit 1; }
venv="${CASTGUARD_CI_VENV_BASE:-$root/.ci-venv}-ortgpu-$version"
fail() { echo "leg onnxruntime-gpu (Python $version): FAILED - $*" >&2; exit 1; }
echo "leg onnxruntime-gpu: Python $version ($python)"

rm -rf "$venv"
"$python" -m venv "$venv" || fail "cannot make $venv"
with_retries "$venv/bin/python" -m pip install --quiet --upgrade pip
with_retries "$venv/bin/python" -m pip install --quiet -e "$root" || fail "pip install -e . failed"
# The README's line for GPU users (section "GPU runners"), verbatim:
"$venv/bin/python" -m pip uninstall --quiet -y onnxruntime && with_retries "$venv/bin/python" -m pip install --quiet onnxruntime-gpu \
    || fail "the README's onnxruntime-gpu install line failed"
"$venv/bin/python" -m pip show onnxruntime >/dev/null 2>&1 && fail "onnxruntime (CPU) is still installed"
"$venv/bin/python" -c "import onnxruntime as o; assert 'CUDAExecutionProvider' in o.get_available_providers(); print('onnxruntime-gpu', o.__version__, o.get_available_providers())" \
    || fail "onnxruntime-gpu does not list CUDAExecutionProvider"
export PATH="$venv/bin:$PATH"

"$venv/bin/python" -c "from onnxruntime.capi import _pybind_state as s; s.get_all_opkernel_def()" >/dev/null 2>&1
echo "leg onnxruntime-gpu: the private call castguard no longer makes exits with $? here (139 = segfault)"

work="$(mktemp -d)/an empty folder"
mkdir -p "$work" && cd "$work" || fail "no scratch folder"
check_signal() {   # step name, exit code
    [ "$2" -ge 128 ] && fail "$1 died by signal $(( $2 - 128 ))"
    return 0
}
for model in "$root"/test_models/*/*.onnx; do
    for args in "--low_precision_type fp16" "--low_precision_type=bf16 --keep_io_types"; do
        name="$(basename "$model" .onnx)"
        out="$work/$name.$(echo "$args" | tr -cd 'a-z0-9').onnx"
        # shellcheck disable=SC2086
        castguard convert --onnx_path "$model" $args --output_path "$out" > convert.log 2>&1
        code=$?
        check_signal "castguard convert $name $args" "$code"
        [ "$code" -eq 0 ] || { tail -5 convert.log; fail "castguard convert $name $args exited $code"; }
        python -c "import onnx, sys; onnx.checker.check_model(sys.argv[1], full_check=True)" "$out" \
            || fail "castguard convert $name $args wrote an invalid model"
        echo "leg onnxruntime-gpu: castguard convert $name $args: ok"
    done
done

pytest --model mnist.onnx -p no:cacheprovider -q > first.log 2>&1
code=$?
check_signal "pytest --model mnist.onnx (first run)" "$code"
grep -q "golden written" first.log || { tail -20 first.log; fail "the first run did not write the golden (exit $code)"; }
pytest --model mnist.onnx -p no:cacheprovider -q > second.log 2>&1
code=$?
check_signal "pytest --model mnist.onnx" "$code"
[ "$code" -eq 0 ] || { tail -20 second.log; fail "pytest --model mnist.onnx exited $code"; }
tail -3 second.log

pytest --model=mnist.onnx --runner=ort-cuda -p no:cacheprovider -q -rs > refused.log 2>&1
code=$?
check_signal "pytest --model mnist.onnx --runner ort-cuda" "$code"
[ "$code" -eq 1 ] || { tail -20 refused.log; fail "pytest --runner ort-cuda (every case skipped) exited $code, not 1"; }
[ "$(grep -c "every case of the requested runner 'ort-cuda' skipped" refused.log)" -eq 1 ] \
    || { tail -20 refused.log; fail "the skipped requested runner is not said exactly once"; }
pytest --model=mnist.onnx --runner=ort-cuda --allow-skipped-runner -p no:cacheprovider -q -rs > cuda.log 2>&1
code=$?
check_signal "pytest --model mnist.onnx --runner ort-cuda --allow-skipped-runner" "$code"
[ "$code" -eq 0 ] || { tail -20 cuda.log; fail "pytest --runner ort-cuda --allow-skipped-runner exited $code"; }
grep -q "cannot use it on this machine: .*lib[a-zA-Z0-9_]*\.so" cuda.log \
    || { tail -20 cuda.log; fail "the ort-cuda skip does not name the missing CUDA library"; }
grep -m1 "SKIPPED" cuda.log | cut -c1-300
grep -q "12 skip" cuda.log || { tail -20 cuda.log; fail "not every ort-cuda case was skipped"; }
echo "leg onnxruntime-gpu (Python $version): ok"
