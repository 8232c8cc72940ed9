"""Big-model figures (issue 14): peak RSS over the process tree and wall time, for ``castguard convert`` and one
``pytest --model big.onnx`` case, against the floor. Not in CI: it writes ~4 GB of files and needs ~6 GB of RAM.

    python benchmarks/bench_big.py --workdir /tmp/big --layers 10 --width 8192     # 2.5 GiB model

The model is built on the fly, one layer in memory at a time: ``x[1,W] -> layers x (MatMul W_i[W,W] -> Tanh)``,
fp32 weights in one external data file (the layout of ``onnx.save_model(..., save_as_external_data=True)``).
Each command runs in a fresh process from an empty folder, with this checkout first on ``PYTHONPATH``; its RSS
is sampled every 20 ms from /proc for the process and all its descendants and summed (a child's weights and
its parent's count together). The floor is what any converter must do: read the weights once, write the
converted weights once (half the bytes) and create + run one onnxruntime session on the model. Files stay
under ``--workdir`` and are deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parents[1]
ALIGN = 4096


def build(path: Path, *, layers: int, width: int, seed: int = 0) -> int:
    """Write the model and its data file layer by layer; returns the weights' bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    data_name = path.name + ".data"
    inits, nodes, prev = [], [], "x"
    with open(path.parent / data_name, "wb") as sink:
        for i in range(layers):
            weight = rng.standard_normal((width, width), dtype=np.float32)
            weight *= np.float32(1.0 / np.sqrt(width))
            offset = -(-sink.tell() // ALIGN) * ALIGN
            sink.write(b"\0" * (offset - sink.tell()))
            sink.write(weight.data)
            tensor = TensorProto(
                name=f"W{i}", data_type=TensorProto.FLOAT, dims=[width, width], data_location=TensorProto.EXTERNAL
            )
            for key, value in (("location", data_name), ("offset", str(offset)), ("length", str(weight.nbytes))):
                tensor.external_data.add(key=key, value=value)
            inits.append(tensor)
            del weight
            nodes += [
                helper.make_node("MatMul", [prev, f"W{i}"], [f"mm{i}"], name=f"matmul{i}"),
                helper.make_node("Tanh", [f"mm{i}"], [f"h{i}"], name=f"tanh{i}"),
            ]
            prev = f"h{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    path.write_bytes(model.SerializeToString())
    return layers * width * width * 4


def _tree_rss(root: int) -> int:
    """Summed VmRSS (bytes) of `root` and every descendant, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/status") as handle:
                kb = next((int(line.split()[1]) for line in handle if line.startswith("VmRSS:")), 0)
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = kb * 1024
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def measure(cmd: list[str], *, cwd: Path) -> dict[str, float | int | str]:
    """Wall time, exit code and peak summed RSS of `cmd` and its descendants."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CI": "true"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"rc": proc.returncode, "wall_s": round(seconds, 1), "peak_rss": peak, "tail": out[-1500:]}


FLOOR = """
import sys, time, numpy as np, onnxruntime as ort
model, data, out, width = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
t0 = time.perf_counter()
with open(data, "rb") as src, open(out, "wb") as dst:
    while chunk := src.read(1 << 24):
        dst.write(chunk[: len(chunk) // 2])          # the fp16 output is half the bytes
t1 = time.perf_counter()
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
session.run(None, {"x": np.ones((1, width), np.float32)})
print(f"io_s={t1 - t0:.1f} ort_s={time.perf_counter() - t1:.1f}")
"""

CHECK = """
import sys, numpy as np, onnx, onnxruntime as ort
onnx.checker.check_model(sys.argv[1], full_check=True)
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
y = session.run(None, {"x": np.ones((1, int(sys.argv[2])), np.float16)})[0]
print("check_model(full_check=True) ok; ORT output finite:", bool(np.isfinite(y.astype(np.float32)).all()))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/castguard-big"))
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--keep", action="store_true", help="keep the model and outputs")
    args = parser.parse_args(argv)
    work: Path = args.workdir
    if work.exists():
        shutil.rmtree(work)
    try:
        model = work / "models" / "big.onnx"
        size = build(model, layers=args.layers, width=args.width)
        gib = size / 2**30
        print(f"model: {args.layers} x MatMul {args.width}x{args.width} fp32, {gib:.2f} GiB of external data")
        py = sys.executable
        rows = {}
        rows["floor"] = measure(
            [py, "-c", FLOOR, str(model), str(model) + ".data", str(work / "floor.bin"), str(args.width)], cwd=work
        )
        (work / "floor.bin").unlink(missing_ok=True)
        empty = work / "empty"
        empty.mkdir()
        rows["convert"] = measure(
            [py, "-m", "harness.convert", f"--onnx_path={model}", "--output_path", str(work / "out" / "big.fp16.onnx")],
            cwd=empty,
        )
        rows["check"] = measure([py, "-c", CHECK, str(work / "out" / "big.fp16.onnx"), str(args.width)], cwd=empty)
        shutil.rmtree(work / "out", ignore_errors=True)
        case = [
            "--precision",
            "fp16",
            "--data-max",
            "512",
            "--exclude-ops",
            "none",
            "--keep-io-types",
            "false",
            "--runner",
            "emulate",
        ]
        pytest = [py, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--model={model}", *case]
        rows["pytest (1st: golden written)"] = measure(pytest, cwd=empty)
        rows["pytest (2nd: compared)"] = measure(pytest, cwd=empty)
        for name, row in rows.items():
            peak = int(row["peak_rss"])
            print(
                f"{name:30s} rc={row['rc']} wall {row['wall_s']:7.1f} s  peak RSS (tree) {peak / 2**30:5.2f} GiB "
                f"= {peak / size:4.2f}x the model"
            )
        floor = float(rows["floor"]["wall_s"])
        print(
            f"convert vs floor: {float(rows['convert']['wall_s']) / floor:.2f}x wall time "
            f"(floor {floor:.1f} s: {rows['floor']['tail'].strip().splitlines()[-1]})"
        )
        print("converted model:", rows["check"]["tail"].strip().splitlines()[-1])
        for name in ("convert", "pytest (1st: golden written)", "pytest (2nd: compared)"):
            if rows[name]["rc"] not in (0, 1) or (name != "pytest (1st: golden written)" and rows[name]["rc"]):
                print(f"--- {name} output ---\n{rows[name]['tail']}")
        print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "tail"} for k, v in rows.items()}))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
