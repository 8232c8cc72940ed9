#!/usr/bin/env bash
# GPU smoke test: castguard as a GPU user meets it, on the lent GPU machine, with onnxruntime-gpu. Run it before
# resolving any issue that touches the converter or the runners, and put its output in the note.
#
#   bash benchmarks/gpu_smoke.sh            (from the repository root; about 3-5 minutes on the H100)
#
# Steps, each in a fresh process; every step prints its exit code, its time and its key line:
#   quickstart       README's quick start, `pytest --model mnist.onnx`, from the repository root (expects 0)
#   convert-bf16     `castguard convert --low_precision_type bf16` on mnist (the call that used to segfault);
#                    the output must pass onnx.checker's full check
#   ortcuda-mnist    `pytest --model mnist --runner emulate --runner=ort-cuda` (the issue-19 crash), 24 cases
#   export-resnet18  timm resnet18, random init, exported with torch.onnx.export (dynamic batch, opset 17)
#   convert-resnet18 `castguard convert` bf16 + keep_io_types with no shape options; full check
#   golden-resnet18  the first pytest run on the export writes its FP32 golden (exit 1 by design)
#   ortcuda-resnet18 `pytest --model resnet18=... --runner emulate --runner=ort-cuda`, fp16 and bf16
# plus one probe outside the verdict: onnxruntime's private get_all_opkernel_def() in a child process (castguard
# stopped calling it; its exit code here is the "before" figure of issue 19).
# Exit status: 2 when any step's process died by a signal, 1 when a step gave an unexpected exit code, an invalid
# model, or (with a GPU visible) an ort-cuda sweep whose ort-cuda cases all skipped; 0 otherwise. Accuracy
# verdicts on a random-init model are results, not smoke failures: pytest's exit 1 is accepted there.
#
# Environment (see ../shared/reference/gpu.md for how the onnxruntime-gpu wheel gets to the machine):
#   onnxruntime-gpu  installed in $CASTGUARD_SMOKE_SITE (default /tmp/site). When that folder has no
#                    onnxruntime yet, the script joins the wheel pieces in $CASTGUARD_SMOKE_ORT_PARTS (default
#                    /tmp/ortw/part0*) and installs them there with pip --no-index --no-deps --target.
#   other packages   castguard is used from this checkout (PYTHONPATH; `python -m harness` is `castguard`, and
#                    pytest loads the plugin with `-p harness.plugin` unless a castguard distribution is
#                    installed). Every wheel in $CASTGUARD_SMOKE_WHEELS (default .dev/wheels) whose distribution
#                    the machine lacks is installed with --no-deps into $CASTGUARD_SMOKE_DEPS (default
#                    /tmp/castguard-deps); then every module castguard and this script import must be importable,
#                    or the script stops and names the missing ones.
#   CUDA libraries   the nvidia-* pip packages' lib folders go on LD_LIBRARY_PATH when python can import nvidia.
#   logs, reports    under $OUT (the device tool's returned folder) when set, else a temporary folder.
set -uo pipefail

root="$(pwd)"
[ -f "$root/harness/cli.py" ] || { echo "gpu_smoke: run me from the castguard repository root" >&2; exit 1; }
py="${PYTHON:-python3}"
site="${CASTGUARD_SMOKE_SITE:-/tmp/site}"
parts="${CASTGUARD_SMOKE_ORT_PARTS:-/tmp/ortw}"
wheels="${CASTGUARD_SMOKE_WHEELS:-$root/.dev/wheels}"
deps="${CASTGUARD_SMOKE_DEPS:-/tmp/castguard-deps}"
out="${OUT:-$(mktemp -d)}/gpu_smoke"
work="$(mktemp -d)/smoke work"       # a path with a space, outside the repository
mkdir -p "$out/logs" "$work" || { echo "gpu_smoke: cannot make $out or $work" >&2; exit 1; }
setup_fail() { echo "gpu_smoke: SETUP FAILED - $*" >&2; exit 1; }

# --- onnxruntime-gpu -----------------------------------------------------------------------------------------
if [ ! -f "$site/onnxruntime/__init__.py" ]; then
    compgen -G "$parts/part0*" >/dev/null \
        || setup_fail "no onnxruntime in $site and no wheel pieces $parts/part0* (../shared/reference/gpu.md)"
    cat "$parts"/part0* > "$parts/joined.whl" || setup_fail "cannot join $parts/part0*"
    # pip wants the wheel's own file name: read it from the wheel's dist-info (name, version, tag)
    wheel_name="$("$py" - "$parts/joined.whl" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    info = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/WHEEL"))
    tag = next(l.split(":", 1)[1].strip() for l in z.read(info).decode().splitlines() if l.startswith("Tag:"))
print(f"{info.split('.dist-info')[0]}-{tag}.whl")
EOF
)" || setup_fail "$parts/joined.whl is not a wheel (are all the pieces there?)"
    mv "$parts/joined.whl" "$parts/$wheel_name"
    "$py" -m pip install -q --no-index --no-deps --target "$site" "$parts/$wheel_name" \
        || setup_fail "pip could not install $parts/$wheel_name into $site"
    echo "gpu_smoke: installed $wheel_name into $site"
fi
export PYTHONPATH="$root:$site:$deps${PYTHONPATH:+:$PYTHONPATH}"

# --- wheels the machine lacks --------------------------------------------------------------------------------
if compgen -G "$wheels/*.whl" >/dev/null; then
    missing_wheels="$("$py" - "$wheels" <<'EOF'
import importlib.metadata as md, pathlib, re, sys
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    name = wheel.name.split("-")[0]
    try:
        md.distribution(re.sub(r"[-_.]+", "-", name))
    except md.PackageNotFoundError:
        print(wheel)
EOF
)"
    if [ -n "$missing_wheels" ]; then
        # shellcheck disable=SC2086
        "$py" -m pip install -q --no-index --no-deps --target "$deps" $missing_wheels \
            || setup_fail "pip could not install the wheels from $wheels"
        echo "gpu_smoke: installed into $deps:" $(for w in $missing_wheels; do basename "$w"; done)
    fi
fi
"$py" - <<'EOF' || setup_fail "modules missing (above): put their wheels in .dev/wheels (see benchmarks/README.md, GPU smoke test)"
import importlib.util, sys
need = ["onnx", "onnxruntime", "numpy", "ml_dtypes", "pytest", "hypothesis", "matplotlib", "filelock", "torch", "timm"]
if sys.version_info < (3, 11):
    need.append("tomli")
missing = [m for m in need if importlib.util.find_spec(m) is None]
print("gpu_smoke: missing modules:", ", ".join(missing) if missing else "none")
sys.exit(1 if missing else 0)
EOF

# --- CUDA libraries and what this machine is -----------------------------------------------------------------
nvidia="$("$py" -c "import nvidia, os; print(list(nvidia.__path__)[0])" 2>/dev/null)"
if [ -n "$nvidia" ]; then
    libs="$(find "$nvidia" -mindepth 2 -maxdepth 2 -type d -name lib | sort | paste -sd: -)"
    [ -n "$libs" ] && export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "gpu_smoke: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
if gpu_name="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)" \
        && [ -n "$gpu_name" ]; then
    has_gpu=1
else
    has_gpu=0 gpu_name="none (expecting the ort-cuda cases to skip, naming the missing library)"
fi
"$py" -c "
import sys, onnx, onnxruntime as o, torch, timm
print('gpu_smoke: python', sys.version.split()[0], '| onnx', onnx.__version__, '| torch', torch.__version__,
      '| timm', timm.__version__)
print('gpu_smoke: onnxruntime', o.__version__, 'from', o.__file__, '| providers', o.get_available_providers())
if 'CUDAExecutionProvider' not in o.get_available_providers():
    sys.exit('gpu_smoke: the onnxruntime imported here is not onnxruntime-gpu (no CUDAExecutionProvider)')
" || setup_fail "onnx, torch, timm and onnxruntime-gpu must import (above)"
echo "gpu_smoke: GPU: $gpu_name"
if "$py" -c "import importlib.metadata as m; m.distribution('castguard')" 2>/dev/null; then
    plugin=()
    echo "gpu_smoke: castguard distribution installed: pytest loads the plugin by its entry point"
else
    plugin=(-p harness.plugin)
    echo "gpu_smoke: castguard from this checkout on PYTHONPATH: pytest -p harness.plugin"
fi

# --- steps ---------------------------------------------------------------------------------------------------
signal_steps=() failed_steps=() summary=()
step() {   # NAME "ACCEPTED EXIT CODES" KEY-LINE-REGEX FOLDER COMMAND...
    local name="$1" accepted="$2" key="$3" dir="$4" log="$out/logs/$1.log" start=$SECONDS code line
    shift 4
    (cd "$dir" && "$@") > "$log" 2>&1
    code=$?
    line="$(grep -aE "$key" "$log" | tail -1 | cut -c1-300)"
    summary+=("$(printf '%-17s exit %-3s %4ss  %s' "$name" "$code" $((SECONDS - start)) "$line")")
    echo "== $name: exit $code in $((SECONDS - start)) s"
    grep -aE "$key" "$log" | tail -4 | cut -c1-300 | sed 's/^/   | /'
    [ -n "$line" ] || echo "   (no line matched /$key/)"
    if [ "$code" -ge 128 ]; then
        echo "   DIED BY SIGNAL $((code - 128)); last lines:"; tail -15 "$log" | sed 's/^/   | /'
        signal_steps+=("$name")
        return 1
    fi
    if [[ " $accepted " != *" $code "* ]]; then
        echo "   UNEXPECTED exit code (accepted: $accepted); last lines:"; tail -15 "$log" | sed 's/^/   | /'
        failed_steps+=("$name")
        return 1
    fi
    return 0
}
valid() {  # NAME MODEL: onnx.checker's full check, in the step's log
    "$py" -c "import onnx, sys; onnx.checker.check_model(sys.argv[1], full_check=True); print('valid:', sys.argv[1])" \
        "$2" >> "$out/logs/$1.log" 2>&1 && echo "   onnx.checker full check: ok" \
        || { echo "   INVALID MODEL $2"; tail -5 "$out/logs/$1.log" | sed 's/^/   | /'; failed_steps+=("$1"); }
}
ort_cuda_cases() {  # NAME REPORT-DIR: statuses per runner from report.json; with a GPU, ort-cuda must have run
    "$py" - "$2/report.json" "$has_gpu" <<'EOF' || failed_steps+=("$1")
import collections, json, sys
cases = json.load(open(sys.argv[1], encoding="utf-8"))["cases"]
count = collections.Counter((c["case"]["runner"], c["status"]) for c in cases)
print("   statuses:", ", ".join(f"{runner} {status} {n}" for (runner, status), n in sorted(count.items())))
cuda = [c for c in cases if c["case"]["runner"] == "ort-cuda"]
for c in cuda:
    if c["status"] != "skip":
        errors = [o["max_abs"] for o in c["outputs"]]
        print(f"   ort-cuda {c['case']['precision']} dmax{c['case']['data_max']}: {c['status']}, "
              f"max_abs {max(errors) if errors else '-'}, speedup {c.get('speedup')} ({c.get('speed_basis') or '-'}: "
              f"{c.get('latency_ms')} vs FP32 {c.get('fp32_latency_ms')} ms), end to end {c.get('e2e_speedup')} "
              f"({c.get('e2e_latency_ms')} vs {c.get('e2e_fp32_latency_ms')} ms) {c['message'][:200]}")
skips = collections.Counter(c["message"].splitlines()[0][:300] for c in cuda if c["status"] == "skip")
for message, n in skips.items():
    print(f"   ort-cuda skip x{n}: {message}")
ran = [c for c in cuda if c["status"] != "skip"]
if sys.argv[2] == "1" and not ran:
    print("   FAILED: a GPU is visible but every ort-cuda case skipped")
    sys.exit(1)
EOF
}

( "$py" -c "from onnxruntime.capi import _pybind_state as s; s.get_all_opkernel_def()"; exit $? ) \
    > "$out/logs/private-probe.log" 2>&1
probe=$?
echo "== probe (not in the verdict): onnxruntime's private get_all_opkernel_def() in a child exits $probe" \
     "(139 = segfault: what every bf16 conversion did before issue 19)"

step quickstart "0" "^castguard: [0-9]+ cases?:" "$root" "$py" -m pytest "${plugin[@]}" --model mnist.onnx -p no:cacheprovider

step convert-bf16 "0" " - (WARNING|ERROR) - |Converted [0-9]" "$work" \
    "$py" -m harness convert --onnx_path "$root/test_models/mnist/mnist.onnx" --low_precision_type bf16 \
    --output_path "$work/mnist.bf16.onnx" && valid convert-bf16 "$work/mnist.bf16.onnx"

step ortcuda-mnist "0 1" "^castguard: [0-9]+ cases?:" "$root" "$py" -m pytest "${plugin[@]}" --model mnist --runner emulate \
    --runner=ort-cuda -p no:cacheprovider -rs --report-dir "$out/report-mnist" \
    && ort_cuda_cases ortcuda-mnist "$out/report-mnist"

step export-resnet18 "0" "^exported" "$work" "$py" -c "
import timm, torch
torch.manual_seed(0)
model = timm.create_model('resnet18', pretrained=False).eval()
torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), 'resnet18.onnx', input_names=['input'],
                  output_names=['logits'], opset_version=17, dynamic_axes={'input': {0: 'batch'}}, dynamo=False)
print('exported resnet18.onnx, random init, dynamic batch, opset 17')
"
if [ -f "$work/resnet18.onnx" ]; then
    step convert-resnet18 "0" " - (WARNING|ERROR) - |Converted [0-9]" "$work" \
        "$py" -m harness convert --onnx_path "$work/resnet18.onnx" --low_precision_type=bf16 --keep_io_types \
        --output_path "$work/resnet18.bf16.onnx" && valid convert-resnet18 "$work/resnet18.bf16.onnx"
    sweep=(--model "resnet18=$work/resnet18.onnx" --input-shapes input:2x3x224x224 --data-max 512
           --exclude-ops none -p no:cacheprovider)
    if step golden-resnet18 "1" "golden written" "$work" "$py" -m pytest "${plugin[@]}" "${sweep[@]}" \
            --precision fp16 && ! grep -q "golden written" "$out/logs/golden-resnet18.log"; then
        echo "   FAILED: the first run did not write the golden"; failed_steps+=(golden-resnet18)
    fi
    step ortcuda-resnet18 "0 1" "^castguard: [0-9]+ cases?:" "$work" "$py" -m pytest "${plugin[@]}" "${sweep[@]}" \
        --precision fp16,bf16 --runner emulate --runner=ort-cuda -rs --report-dir "$out/report-resnet18" \
        && ort_cuda_cases ortcuda-resnet18 "$out/report-resnet18"
fi

echo
echo "== summary (logs and reports in $out)"
printf '%s\n' "${summary[@]}"
if [ ${#signal_steps[@]} -gt 0 ]; then
    echo "gpu_smoke: FAILED - died by a signal: ${signal_steps[*]}"; exit 2
fi
if [ ${#failed_steps[@]} -gt 0 ]; then
    echo "gpu_smoke: FAILED - ${failed_steps[*]}"; exit 1
fi
echo "gpu_smoke: ok (no process died; every step gave an accepted exit code)"
