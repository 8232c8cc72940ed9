#!/usr/bin/env bash
# CI leg: castguard with its trt extra (TensorRT-RTX 1.7.1 wheels), on this CPU-only machine. TensorRT-RTX builds
# strongly typed engines ahead of time without a GPU, so here every sweep case's converted model is really built.
# Checks:
#   - pip install -e ".[dev,trt]" brings tensorrt_rtx_bindings, and it imports;
#   - pytest -m trt_build: the build check on the bundled models and on every model registered in test_models/
#     (every default sweep case builds with the converted types, or fails in the parser on a known bf16 op and then
#     builds with --target tensorrt), the HardSwish-in-bf16 flow, and the build-check unit tests;
#   - the TensorRT runner's tests: the build path runs, every engine test skips naming what is missing here (no GPU);
#   - from an empty folder whose path has a space, pytest --model timm_mobilenetv3 in bf16: the terminal says
#     "does not build ... HardSwish (bf16)", and with --target tensorrt every case builds.
# Venv: "$CASTGUARD_CI_VENV_BASE-trtrtx". About 2 minutes on 2 cores.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../netretry.sh"   # with_retries, pip retry settings
root="$(pwd)"
python="${CASTGUARD_CI_PYTHON:-python3}"
venv="${CASTGUARD_CI_VENV_BASE:-$root/.ci-venv}-trtrtx"
fail() { echo "leg tensorrt-rtx: FAILED - $*" >&2; exit 1; }

rm -rf "$venv"
"$python" -m venv "$venv" || fail "cannot make $venv"
with_retries "$venv/bin/python" -m pip install --quiet --upgrade pip
with_retries "$venv/bin/python" -m pip install --quiet -e "$root[dev,trt]" || fail 'pip install -e ".[dev,trt]" failed'
"$venv/bin/python" -c "import tensorrt_rtx_bindings as t; print('tensorrt_rtx_bindings', t.__version__)" \
    || fail "tensorrt_rtx_bindings does not import"
export PATH="$venv/bin:$PATH"

"$venv/bin/python" -m pytest -p no:cacheprovider -q -n 2 -m trt_build -rs tests/unit/runners/test_trt_buildcheck.py \
    tests/integration/test_trt_build_sweep.py || fail "the TensorRT build-check tests failed"
"$venv/bin/python" -m pytest -p no:cacheprovider -q -n 0 -rs tests/unit/runners/test_trt_runner.py \
    tests/unit/runners/test_trt_run_path.py tests/scenarios/test_seed_000.py tests/scenarios/test_seed_003.py \
    || fail "the TensorRT runner and seed tests failed"

work="$(mktemp -d)/an empty folder"
mkdir -p "$work" && cd "$work" || fail "no scratch folder"
sweep=(--model timm_mobilenetv3 -p no:cacheprovider -q --precision bf16 --data-max 512 --exclude-ops none)
pytest "${sweep[@]}" > first.log 2>&1          # writes the golden (exit 1 by design)
grep -q "golden written" first.log || { tail -20 first.log; fail "the first run did not write the golden"; }
pytest "${sweep[@]}" > plain.log 2>&1
grep -q "does not build in TensorRT-RTX 1.7.1.116: HardSwish (bf16) at node /bn1/act/HardSwish" plain.log \
    || { tail -20 plain.log; fail "the bf16 MobileNetV3 was not reported as 'does not build: HardSwish'"; }
pytest "${sweep[@]}" --target=tensorrt > target.log 2>&1
code=$?
[ "$code" -eq 0 ] || { tail -20 target.log; fail "pytest --target tensorrt exited $code"; }
grep -q "TensorRT build check (TensorRT-RTX 1.7.1.116): 1 of 1 checked case(s) build with the converted types" \
    target.log || { tail -20 target.log; fail "with --target tensorrt the bf16 MobileNetV3 does not build"; }
grep "TensorRT build check" plain.log target.log
echo "leg tensorrt-rtx: ok"
