"""Conversion at deploy shapes (issue 26): castguard convert vs AutoCast 0.47 vs one FP32 forward, each a fresh
process on the same model and the same calibration file (batch x sequence token ids, all-ones attention mask);
median wall time and peak RSS over interleaved rounds, and the ratios. No timed assertions.

    python benchmarks/deploy_shapes.py                                   # CPU: the three models at 8 x 512
    python benchmarks/deploy_shapes.py --models decoder --decoder 8x1024 --providers cuda:0 --no-autocast

Models: the bundled ``bert_tiny`` (its position table holds 256 tokens, so it runs at batch x min(seq, 256)) and
``llama_tiny`` exports, and ``decoder``: a LLaMA-style random-init decoder built here with onnx.helper
(``--decoder LAYERSxHIDDEN``, default 4x256; 8x1024 is ~110 M parameters): RMSNorm, rotary embeddings, causal and
padding masks, SiLU-gated MLP, LM head. ``--before DIR`` also times castguard from another checkout (today's main)
with the same command line. ``--providers cuda:0`` is passed to castguard and used by the forward; AutoCast gets
it too unless ``--no-autocast`` (its minimal venv has the CPU onnxruntime only). Figures go to stdout as a
markdown table and, with ``--json FILE``, to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
AUTOCAST = Path(os.environ.get("CASTGUARD_AUTOCAST_SCRIPT", "/work/shared/tools/run_modelopt_autocast.sh"))
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def decoder(
    layers: int, hidden: int, *, vocab: int = 8192, max_positions: int = 4096, seed: int = 0, massive: float = 0.0
) -> onnx.ModelProto:
    """LLaMA-style decoder, random init: input_ids, attention_mask [batch, sequence] int64 -> logits. ``massive``:
    added to one channel of every token's embedding (a "massive activation", as real LLMs have): above 256, the
    first RMSNorm's x*x overflows fp16 unless that norm is kept FP32."""
    rng = np.random.default_rng(seed)
    heads = max(1, hidden // 64)
    head_dim = hidden // heads
    ffn = int(hidden * 8 / 3) // 64 * 64
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(name: str, shape: tuple[int, ...]) -> str:
        return const(name, (rng.standard_normal(shape) * shape[0] ** -0.5).astype(np.float32))

    def op(kind: str, inputs: list[str], out: str, **attrs: object) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def rms(x: str, tag: str) -> str:
        ms = op("ReduceMean", [op("Mul", [x, x], f"{tag}_sq")], f"{tag}_ms", axes=[-1], keepdims=1)
        scaled = op("Div", [x, op("Sqrt", [op("Add", [ms, "eps"], f"{tag}_addeps")], f"{tag}_rms")], f"{tag}_norm")
        return op("Mul", [scaled, const(f"{tag}_w", np.ones(hidden, np.float32))], f"{tag}_out")

    inv = 1.0 / (10000 ** (np.arange(0, head_dim, 2) / head_dim))
    angles = np.outer(np.arange(max_positions), inv)
    angles = np.concatenate([angles, angles], axis=1)
    const("cos_table", np.cos(angles).astype(np.float32))
    const("sin_table", np.sin(angles).astype(np.float32))
    const("eps", np.array(1e-6, np.float32))
    const("one", np.array(1.0, np.float32))
    const("neg_big", np.array(-1e4, np.float32))
    const("zero_i", np.array([0], np.int64))
    const("one_i", np.array([1], np.int64))
    const("half", np.array([head_dim // 2], np.int64))
    const("end", np.array([head_dim], np.int64))
    const("last_axis", np.array([-1], np.int64))
    const("heads_shape", np.array([0, 0, heads, head_dim], np.int64))
    const("hidden_shape", np.array([0, 0, hidden], np.int64))
    const("axes12", np.array([1, 2], np.int64))
    const("axes01", np.array([0, 1], np.int64))
    const("scale", np.array(head_dim**-0.5, np.float32))
    seq = op(
        "Slice", [op("Shape", ["input_ids"], "ids_shape"), "one_i", const("two_i", np.array([2], np.int64))], "seq"
    )
    cos = op("Slice", ["cos_table", "zero_i", seq, "zero_i"], "cos")
    sin = op("Slice", ["sin_table", "zero_i", seq, "zero_i"], "sin")
    square = op("Concat", [seq, seq], "square_shape", axis=0)
    causal = op("Trilu", [op("Expand", ["neg_big", square], "full_mask")], "causal", upper=1)
    causal = op("Unsqueeze", [causal, "axes01"], "causal4")
    keep = op("Cast", ["attention_mask"], "mask_f", to=F32)
    padding = op("Mul", [op("Sub", ["one", keep], "masked_out"), "neg_big"], "padding")
    bias = op("Add", [causal, op("Unsqueeze", [padding, "axes12"], "padding4")], "attn_bias")
    h = op("Gather", [weight("embed", (vocab, hidden)), "input_ids"], "embedded")
    if massive:
        inits[-1].CopyFrom(
            numpy_helper.from_array(numpy_helper.to_array(inits[-1]) + _channel(hidden, massive), "embed")
        )

    def rotate(x: str, tag: str) -> str:
        first = op("Slice", [x, "zero_i", "half", "last_axis"], f"{tag}_x1")
        second = op("Slice", [x, "half", "end", "last_axis"], f"{tag}_x2")
        rotated = op("Concat", [op("Neg", [second], f"{tag}_neg"), first], f"{tag}_rot", axis=-1)
        return op("Add", [op("Mul", [x, cos], f"{tag}_cos"), op("Mul", [rotated, sin], f"{tag}_sin")], f"{tag}_rope")

    for layer in range(layers):
        p = f"l{layer}"
        n = rms(h, f"{p}_ln1")

        def project(name: str, perm: list[int], n: str = n, p: str = p) -> str:
            flat = op("MatMul", [n, weight(f"{p}_w{name}", (hidden, hidden))], f"{p}_{name}")
            return op(
                "Transpose", [op("Reshape", [flat, "heads_shape"], f"{p}_{name}_heads")], f"{p}_{name}_t", perm=perm
            )

        q = rotate(project("q", [0, 2, 1, 3]), f"{p}_q")
        k = rotate(project("k", [0, 2, 1, 3]), f"{p}_k")
        v = project("v", [0, 2, 1, 3])
        scores = op(
            "Mul",
            [op("MatMul", [q, op("Transpose", [k], f"{p}_kt", perm=[0, 1, 3, 2])], f"{p}_qk"), "scale"],
            f"{p}_scaled",
        )
        probs = op("Softmax", [op("Add", [scores, bias], f"{p}_masked")], f"{p}_probs", axis=-1)
        attn = op("Transpose", [op("MatMul", [probs, v], f"{p}_ctx")], f"{p}_ctx_t", perm=[0, 2, 1, 3])
        attn = op(
            "MatMul",
            [op("Reshape", [attn, "hidden_shape"], f"{p}_ctx_flat"), weight(f"{p}_wo", (hidden, hidden))],
            f"{p}_o",
        )
        h = op("Add", [h, attn], f"{p}_res1")
        n = rms(h, f"{p}_ln2")
        gate = op("MatMul", [n, weight(f"{p}_wg", (hidden, ffn))], f"{p}_gate")
        up = op("MatMul", [n, weight(f"{p}_wu", (hidden, ffn))], f"{p}_up")
        act = op("Mul", [op("Mul", [gate, op("Sigmoid", [gate], f"{p}_sig")], f"{p}_silu"), up], f"{p}_act")
        h = op("Add", [h, op("MatMul", [act, weight(f"{p}_wd", (ffn, hidden))], f"{p}_down")], f"{p}_res2")
    nodes.append(
        helper.make_node("MatMul", [rms(h, "final"), weight("lm_head", (hidden, vocab))], ["logits"], name="lm_head")
    )
    graph = helper.make_graph(
        nodes,
        "decoder",
        [
            helper.make_tensor_value_info("input_ids", I64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", I64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("logits", F32, ["batch", "sequence", vocab])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="castguard-bench")
    model.ir_version = 8
    return model


def _channel(hidden: int, value: float) -> np.ndarray:
    row = np.zeros(hidden, np.float32)
    row[0] = value
    return row


_FORWARD = (
    "import sys, numpy as np, onnxruntime as ort; p = sys.argv[3].split(','); "
    "prov = [('CUDAExecutionProvider', {'device_id': x.split(':')[1] if ':' in x else '0'}) if x.startswith('cuda') "
    "else 'CPUExecutionProvider' for x in p]; "
    "s = ort.InferenceSession(sys.argv[1], providers=prov); f = dict(np.load(sys.argv[2])); s.run(None, f)"
)
_PROBE = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); "
    "p = subprocess.run(sys.argv[2:], capture_output=True, text=True, cwd=sys.argv[1] or None); "
    "w = time.perf_counter() - t; "
    "print(w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, p.returncode); "
    "sys.stderr.write(p.stderr[-3000:])"
)


def measure(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall s, peak RSS MB of the largest process of the command, error text or '') in a fresh wrapper."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(cwd or ""), *cmd], capture_output=True, text=True, check=False, env=env
    )
    wall, rss, rc = proc.stdout.split()
    return float(wall), float(rss), "" if rc == "0" else proc.stderr[-600:]


def prepare(name: str, folder: Path, *, batch: int, seq: int, decoder_size: str) -> tuple[Path, Path, str]:
    """(model path, calibration .npz, label) for one benchmark model."""
    if name == "decoder":
        layers, hidden = (int(v) for v in decoder_size.split("x"))
        path = folder / f"decoder_{decoder_size}.onnx"
        onnx.save(decoder(layers, hidden), path)
        label, vocab = f"decoder {decoder_size}", 8192
    else:
        from test_models import MODELS

        path, label = MODELS[name].path, name
        vocab = 512
        if name == "bert_tiny":
            seq = min(seq, 256)  # its position table
    calib = folder / f"{name}_{batch}x{seq}.npz"
    ids = np.random.default_rng(0).integers(0, vocab, (batch, seq), dtype=np.int64)
    np.savez(calib, input_ids=ids, attention_mask=np.ones((batch, seq), np.int64))
    return path, calib, f"{label} at {batch}x{seq}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert_tiny,llama_tiny,decoder")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--decoder", default="4x256", help="LAYERSxHIDDEN of the built decoder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--providers", default="cpu", help="comma-separated: cpu or cuda:N")
    parser.add_argument("--before", type=Path, help="another castguard checkout to time too (today's main)")
    parser.add_argument("--no-autocast", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    providers = args.providers.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="castguard-deploy-") as tmp:
        folder = Path(tmp)
        for name in args.models.split(","):
            path, calib, label = prepare(name, folder, batch=args.batch, seq=args.seq, decoder_size=args.decoder)
            flags = [
                "--keep_io_types",
                "--log_level",
                "WARNING",
                "--calibration_data",
                str(calib),
                "--providers",
                *providers,
            ]
            out = str(folder / "out.onnx")
            tools: dict[str, tuple[list[str], Path | None]] = {
                "forward": ([sys.executable, "-c", _FORWARD, str(path), str(calib), ",".join(providers)], None),
                "castguard": (
                    [sys.executable, "-m", "harness.convert", "--onnx_path", str(path), "--output_path", out, *flags],
                    ROOT,
                ),
            }
            if args.before is not None:
                tools["castguard before"] = (
                    [sys.executable, "-m", "harness.convert", "--onnx_path", str(path), "--output_path", out, *flags],
                    args.before,
                )
            if not args.no_autocast and AUTOCAST.is_file():
                tools["autocast"] = (["bash", str(AUTOCAST), str(path), out, *flags], None)
                measure(tools["autocast"][0])  # the first call may create its venv: not measured
            figures: dict[str, list[tuple[float, float]]] = {tool: [] for tool in tools}
            for _ in range(args.rounds):
                for tool, (cmd, cwd) in tools.items():
                    env = (
                        None
                        if cwd is None
                        else {  # that checkout first; the rest (onnxruntime-gpu's folder) kept
                            **os.environ,
                            "PYTHONPATH": os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")])),
                        }
                    )
                    wall, rss, error = measure(cmd, cwd=cwd, env=env)
                    if error:
                        sys.stdout.write(f"[deploy_shapes] {label} {tool} failed: {error}\n")
                        wall = rss = float("nan")
                    figures[tool].append((wall, rss))
            row = {"model": label, "providers": args.providers}
            for tool, values in figures.items():
                row[f"{tool}_wall_s"] = statistics.median(v[0] for v in values)
                row[f"{tool}_peak_rss_mb"] = max(v[1] for v in values)
            rows.append(row)
            sys.stdout.write(f"[deploy_shapes] {json.dumps(row)}\n")
            sys.stdout.flush()
    _table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def _table(rows: list[dict]) -> None:  # type: ignore[type-arg]
    tools = [t for t in ("castguard", "castguard before", "autocast") if any(f"{t}_wall_s" in r for r in rows)]
    head = (
        "| model | forward s, MB | "
        + " | ".join(f"{t} s, MB" for t in tools)
        + " | castguard / forward: wall, RSS | castguard / AutoCast wall |"
    )
    sys.stdout.write("\n" + head + "\n|" + "---|" * (head.count("|") - 1) + "\n")
    for r in rows:
        cells = [f"{r['forward_wall_s']:.2f}, {r['forward_peak_rss_mb']:.0f}"]
        cells += [f"{r[f'{t}_wall_s']:.2f}, {r[f'{t}_peak_rss_mb']:.0f}" if f"{t}_wall_s" in r else "–" for t in tools]
        ratio = (
            f"{r['castguard_wall_s'] / r['forward_wall_s']:.2f}x, "
            f"{r['castguard_peak_rss_mb'] / r['forward_peak_rss_mb']:.2f}x"
        )
        versus = f"{r['castguard_wall_s'] / r['autocast_wall_s']:.2f}x" if "autocast_wall_s" in r else "–"
        sys.stdout.write(f"| {r['model']} | " + " | ".join(cells) + f" | {ratio} | {versus} |\n")


if __name__ == "__main__":
    sys.exit(main())
