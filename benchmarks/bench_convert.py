"""Converter cost and quality against ModelOpt AutoCast 0.47 on 1k+ node models built in code.

Run: ``pytest benchmarks/bench_convert.py -s`` (figures are printed and stored in the benchmark JSON's
extra_info; there are no timed assertions). AutoCast runs through
``/work/shared/tools/run_modelopt_autocast.sh`` (its own venv); those cases skip with the reason when the
script or its venv is unavailable. Every process-level figure (wall, peak RSS) is for a fresh
interpreter running the command line, for both tools, so imports are included on both sides.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.convert.flops import flop_share
from harness.convert.graphinfo import build_info
from harness.core.dtypes import LOW_ELEMS
from harness.runners import make_runner

AUTOCAST = Path(os.environ.get("CASTGUARD_AUTOCAST_SCRIPT", "/work/shared/tools/run_modelopt_autocast.sh"))
F32 = TensorProto.FLOAT


def _mlp(layers: int, width: int) -> onnx.ModelProto:
    """layers x (MatMul, Add, Relu, Mul): 4 nodes per layer."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits += [
            numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), f"w{i}"),
            numpy_helper.from_array(rng.standard_normal(width).astype(np.float32) * 0.1, f"b{i}"),
            numpy_helper.from_array(np.array(1.2, np.float32), f"s{i}"),
        ]
        nodes += [
            helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("Mul", [f"r{i}", f"s{i}"], [f"h{i}"], name=f"mul{i}"),
        ]
        prev = f"h{i}"
    nodes.append(helper.make_node("Softmax", [prev], ["y"], name="softmax", axis=-1))
    return _model(nodes, inits, [1, 16, width], [1, 16, width])


def _attention(blocks: int, width: int, seq: int) -> onnx.ModelProto:
    """blocks x (self-attention + MLP + 2 decomposed LayerNorms): 30 nodes per block."""
    rng = np.random.default_rng(1)
    nodes, inits, prev = [], [], "x"

    def weight(name: str, shape: tuple[int, ...], scale: float) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def add(op: str, inputs: list[str], out: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    inits += [
        axes,
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
        numpy_helper.from_array(np.array(1 / np.sqrt(width), np.float32), "inv_sqrt"),
    ]
    for b in range(blocks):
        p = f"b{b}_"

        def norm(src: str, tag: str) -> str:
            mean = add("ReduceMean", [src, "axes"], f"{p}{tag}_mean")
            centered = add("Sub", [src, mean], f"{p}{tag}_center")
            var = add("ReduceMean", [add("Pow", [centered, "two"], f"{p}{tag}_pow"), "axes"], f"{p}{tag}_var")
            std = add("Sqrt", [add("Add", [var, "eps"], f"{p}{tag}_addeps")], f"{p}{tag}_std")
            return add("Div", [centered, std], f"{p}{tag}_norm")

        h = norm(prev, "ln1")
        q = add("MatMul", [h, weight(f"{p}wq", (width, width), width**-0.5)], f"{p}q")
        k = add("MatMul", [h, weight(f"{p}wk", (width, width), width**-0.5)], f"{p}k")
        v = add("MatMul", [h, weight(f"{p}wv", (width, width), width**-0.5)], f"{p}v")
        kt = add("Transpose", [k], f"{p}kt", perm=[0, 2, 1])
        scores = add("Mul", [add("MatMul", [q, kt], f"{p}qk"), "inv_sqrt"], f"{p}scaled")
        attn = add("MatMul", [add("Softmax", [scores], f"{p}softmax", axis=-1), v], f"{p}attn")
        o = add("MatMul", [attn, weight(f"{p}wo", (width, width), width**-0.5)], f"{p}o")
        r1 = add("Add", [prev, o], f"{p}res1")
        h2 = norm(r1, "ln2")
        up = add(
            "Add",
            [
                add("MatMul", [h2, weight(f"{p}w1", (width, 2 * width), width**-0.5)], f"{p}up"),
                weight(f"{p}c1", (2 * width,), 0.1),
            ],
            f"{p}up_bias",
        )
        act = add("Mul", [up, add("Sigmoid", [up], f"{p}sig")], f"{p}silu")
        down = add("MatMul", [act, weight(f"{p}w2", (2 * width, width), (2 * width) ** -0.5)], f"{p}down")
        prev = add("Add", [r1, add("Mul", [down, "two"], f"{p}down_scaled")], f"{p}res2")
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return _model(nodes, inits, [1, seq, width], [1, seq, width], opset=18)


def _model(nodes: list, inits: list, in_shape: list[int], out_shape: list[int], *, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "bench",
        [helper.make_tensor_value_info("x", F32, in_shape)],
        [helper.make_tensor_value_info("y", F32, out_shape)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="castguard-bench")
    model.ir_version = 8
    return model


BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp_1201": lambda: _mlp(300, 256),
    "attention_1201": lambda: _attention(40, 128, 64),
}


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bench_convert")
    result = {}
    for name, build in BUILDERS.items():
        model = build()
        assert len(model.graph.node) > 1000
        result[name] = folder / f"{name}.onnx"
        onnx.save(model, result[name])
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        np.savez(folder / f"{name}.npz", x=np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32))
    return result


def _peak_rss_mb(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run `cmd` in a fresh wrapper interpreter; (wall s, peak RSS MB of the largest descendant, result)."""
    probe = """
import subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
w = time.perf_counter() - t
try:
    import resource   # POSIX only
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
except ImportError:
    rss = float("nan")
    sys.stderr.write("peak RSS unavailable here (no resource module)\\n")
print(w, rss, p.returncode)
sys.stderr.write(p.stderr[-3000:])
"""
    proc = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True, check=False)
    wall, rss, rc = proc.stdout.split()
    proc.returncode = int(rc)
    return float(wall), float(rss), proc


def _report(name: str, what: str, **figures: object) -> None:
    text = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
    sys.stdout.write(f"\n[bench_convert] {name} {what}: {text}\n")


def _floor(path: Path, out: Path) -> None:
    """The floor: onnx.load + one onnxruntime inference + onnx.save, in process."""
    import onnxruntime as ort

    model = onnx.load(path)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    session.run(None, {"x": np.zeros(shape, np.float32)})
    onnx.save(model, out)


def _castguard(path: Path, out: Path) -> None:
    """load + collect_magnitudes (one ORT run, in a child process) + convert + save: what a conversion pays."""
    loaded = onnx.load(path)
    result = convert(loaded, options=ConvertOptions(keep_io_types=True), magnitudes=collect_magnitudes(loaded))
    onnx.save(result.model, out)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_castguard_in_process_vs_floor(
    benchmark,
    paths: dict[str, Path],
    name: str,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    """Interleaved rounds of the floor and of the converter, so machine load hits both alike."""
    floors: list[float] = []

    def run() -> None:
        start = time.perf_counter()
        _floor(paths[name], tmp_path / "floor.onnx")
        floors.append(time.perf_counter() - start)
        _castguard(paths[name], tmp_path / "out.onnx")

    _castguard(paths[name], tmp_path / "out.onnx")  # warm-up: imports, page cache
    benchmark.pedantic(run, rounds=5, iterations=1)
    ours = benchmark.stats.stats.median - float(np.median(floors))
    model = onnx.load(paths[name])
    data = collect_magnitudes(model)
    start = time.perf_counter()
    convert(model, options=ConvertOptions(keep_io_types=True), magnitudes=data)
    cheap = time.perf_counter() - start
    benchmark.extra_info.update(floor_s=float(np.median(floors)), castguard_s=ours, convert_only_s=cheap)
    _report(
        name,
        "in-process",
        floor_s=float(np.median(floors)),
        castguard_s=ours,
        ratio_to_floor=ours / float(np.median(floors)),
        convert_only_s=cheap,
    )


@pytest.mark.parametrize("tool", ["castguard", "autocast"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_cli_wall_and_peak_rss(
    benchmark,
    paths: dict[str, Path],
    name: str,
    tool: str,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    """Both command lines in fresh processes, same model, same flags (defaults + --keep_io_types) and the same
    calibration data (one batch), so both classify from identical magnitudes."""
    out = tmp_path / f"{tool}.onnx"
    flags = ["--keep_io_types", "--log_level", "WARNING", "--calibration_data", str(paths[name].with_suffix(".npz"))]
    if tool == "castguard":
        cmd = [
            sys.executable,
            "-m",
            "harness.convert",
            "--onnx_path",
            str(paths[name]),
            "--output_path",
            str(out),
            *flags,
        ]
    else:
        if not AUTOCAST.is_file():
            pytest.skip(f"AutoCast script not found at {AUTOCAST}")
        cmd = ["bash", str(AUTOCAST), str(paths[name]), str(out), *flags]
        wall, _, proc = _peak_rss_mb(cmd)  # first call may create the venv; not measured
        if proc.returncode != 0:
            pytest.skip(f"AutoCast unavailable or failed (rc={proc.returncode}): {proc.stderr[-400:]}")
    figures: dict[str, float] = {}

    def run() -> None:
        wall, rss, proc = _peak_rss_mb(cmd)
        assert proc.returncode == 0, proc.stderr
        figures["wall_s"], figures["peak_rss_mb"] = wall, max(rss, figures.get("peak_rss_mb", 0.0))

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update(figures)
    _report(name, f"{tool} CLI", median_s=benchmark.stats.stats.median, peak_rss_mb=figures["peak_rss_mb"])
    _report(name, f"{tool} quality", **_quality(paths[name], out))


def _quality(source: Path, converted_path: Path) -> dict[str, float]:
    """Low-precision FLOP share (same estimator for both tools) and max |error| on emulate vs ORT FP32."""
    import onnxruntime as ort

    original, converted = onnx.load(source), onnx.load(converted_path)
    inferred = onnx.shape_inference.infer_shapes(converted)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    low = {n.name for n in converted.graph.node if n.op_type != "Cast" and types.get(n.output[0]) in LOW_ELEMS}
    info = build_info(original)
    share = flop_share(
        list(original.graph.node), lambda n: n.name in low, info.shapes.get, dict(info.initializers)
    ).share
    x = np.random.default_rng(7).uniform(
        -1, 1, [d.dim_value for d in original.graph.input[0].type.tensor_type.shape.dim]
    )
    feed = {"x": x.astype(np.float32)}
    gold = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    with make_runner("emulate", converted) as runner:
        got = runner.infer(feed)["y"].astype(np.float32)
    assert 0.0 <= share <= 1.0 and got.shape == gold.shape
    return {
        "lowp_flop_share": share,
        "max_abs_err": float(np.abs(got - gold).max()),
        "casts": float(sum(n.op_type == "Cast" for n in converted.graph.node)),
    }


# --- Corpus wall-time ratios (issue 10): castguard CLI vs AutoCast CLI vs the floor, per model ----------------


def _vgg19_like() -> onnx.ModelProto:
    """VGG-19's layer sizes (16 Conv 3x3 + 3 Gemm, 548 MB of FP32 weights, 1x3x224x224): large initializers."""
    cfg = [64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0]
    rng = np.random.default_rng(0)
    nodes, inits, prev, channels = [], [], "x", 3
    for i, width in enumerate(cfg):
        if width == 0:
            nodes.append(
                helper.make_node("MaxPool", [prev], [f"p{i}"], name=f"pool{i}", kernel_shape=[2, 2], strides=[2, 2])
            )
            prev = f"p{i}"
            continue
        scale = np.sqrt(2 / (channels * 9))
        inits += [
            numpy_helper.from_array(
                (rng.standard_normal((width, channels, 3, 3), np.float32) * scale).astype(np.float32), f"w{i}"
            ),
            numpy_helper.from_array(np.zeros(width, np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node(
                "Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1], kernel_shape=[3, 3]
            ),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
        ]
        prev, channels = f"r{i}", width
    nodes.append(helper.make_node("Flatten", [prev], ["flat"], name="flatten"))
    prev, width = "flat", 512 * 7 * 7
    for j, out in enumerate((4096, 4096, 1000)):
        inits += [
            numpy_helper.from_array(
                (rng.standard_normal((out, width), np.float32) * np.sqrt(2 / width)).astype(np.float32), f"fw{j}"
            ),
            numpy_helper.from_array(np.zeros(out, np.float32), f"fb{j}"),
        ]
        nodes.append(helper.make_node("Gemm", [prev, f"fw{j}", f"fb{j}"], [f"g{j}"], name=f"fc{j}", transB=1))
        prev, width = f"g{j}", out
        if j < 2:
            nodes.append(helper.make_node("Relu", [prev], [f"fr{j}"], name=f"frelu{j}"))
            prev = f"fr{j}"
    nodes.append(helper.make_node("Softmax", [prev], ["y"], name="softmax", axis=-1))
    return _model(nodes, inits, [1, 3, 224, 224], [1, 1000], opset=13)


def _torch_exports(folder: Path) -> dict[str, Path]:
    """timm and transformers models exported here (random weights, no download) when torch is installed: timm
    mobilenetv3_small_100 / mobilenetv3_large_100 (1x3x224x224) and a 4-layer BERT (hidden 256, vocab 1000, seq
    128), TorchScript exporter, opset 17. Elsewhere, point CASTGUARD_BENCH_EXPORTS at a folder of them."""
    try:
        import timm  # type: ignore[import-not-found]
        import torch  # type: ignore[import-not-found]
        import transformers  # type: ignore[import-not-found]
    except ImportError:
        return {}
    torch.manual_seed(0)
    made: dict[str, Path] = {}
    for name in ("mobilenetv3_small_100", "mobilenetv3_large_100"):
        made[f"timm_{name}"] = folder / f"timm_{name}.onnx"
        torch.onnx.export(
            timm.create_model(name, pretrained=False).eval(),
            (torch.randn(1, 3, 224, 224),),
            str(made[f"timm_{name}"]),
            opset_version=17,
            dynamo=False,
            input_names=["x"],
        )
    config = transformers.BertConfig(
        vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
    )

    class Bert(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = transformers.BertModel(config).eval()

        def forward(self, ids: object, mask: object) -> object:
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.randint(0, 1000, (1, 128))
    made["hf_bert_4layer"] = folder / "hf_bert_4layer.onnx"
    torch.onnx.export(
        Bert().eval(),
        (ids, torch.ones_like(ids)),
        str(made["hf_bert_4layer"]),
        input_names=["input_ids", "attention_mask"],
        output_names=["hidden"],
        opset_version=17,
        dynamo=False,
    )
    return made


def _corpus(folder: Path) -> dict[str, Path]:
    from test_models import MODELS

    paths = {name: spec.path for name, spec in MODELS.items()}
    for name, build in {**BUILDERS, "vgg19_like": _vgg19_like}.items():
        paths[name] = folder / f"{name}.onnx"
        onnx.save(build(), paths[name])
    paths.update(_torch_exports(folder))
    extra = os.environ.get("CASTGUARD_BENCH_EXPORTS")  # exports made by _torch_exports on a machine with torch
    if extra:
        paths.update({p.stem: p for p in sorted(Path(extra).glob("*.onnx"))})
    only = os.environ.get("CASTGUARD_BENCH_ONLY")  # comma-separated model names
    return {k: v for k, v in paths.items() if not only or k in only.split(",")}


_FLOOR = (
    "import sys, numpy as np, onnx, onnxruntime as ort; from harness.convert.calibration import random_feeds; "
    "m = onnx.load(sys.argv[1]); s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); "
    "s.run(None, random_feeds(m, seed=0, input_shapes=None)[0][0]); onnx.save(m, sys.argv[2])"
)


def test_corpus_wall_time_ratios(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Per model, 3 (CASTGUARD_BENCH_ROUNDS) interleaved rounds of: castguard CLI, AutoCast CLI, the floor (fresh process: load + one
    ORT run + save), same flags (defaults + --keep_io_types); median walls, ratios, and the corpus median/max."""
    if not AUTOCAST.is_file():
        pytest.skip(f"AutoCast script not found at {AUTOCAST}")
    folder = tmp_path_factory.mktemp("corpus")
    rows = []
    for name, path in _corpus(folder).items():
        cmds = {
            "castguard": [
                sys.executable,
                "-m",
                "harness.convert",
                "--onnx_path",
                str(path),
                "--output_path",
                str(folder / f"{name}.cg.onnx"),
                "--keep_io_types",
                "--log_level",
                "WARNING",
            ],
            "autocast": [
                "bash",
                str(AUTOCAST),
                str(path),
                str(folder / f"{name}.ac.onnx"),
                "--keep_io_types",
                "--log_level",
                "WARNING",
            ],
            "floor": [sys.executable, "-c", _FLOOR, str(path), str(folder / f"{name}.floor.onnx")],
        }
        walls: dict[str, list[float]] = {tool: [] for tool in cmds}
        for _ in range(int(os.environ.get("CASTGUARD_BENCH_ROUNDS", "3"))):
            for tool, cmd in cmds.items():
                wall, _, proc = _peak_rss_mb(cmd)
                if proc.returncode != 0:
                    walls[tool].append(float("nan"))
                    sys.stdout.write(f"\n[bench_convert] {name} {tool} failed: {proc.stderr[-300:]}\n")
                else:
                    walls[tool].append(wall)
        cg, ac, fl = (float(np.median(walls[t])) for t in ("castguard", "autocast", "floor"))
        rows.append((name, cg, ac, fl))
        _report(name, "corpus", castguard_s=cg, autocast_s=ac, floor_s=fl, vs_autocast=cg / ac, vs_floor=cg / fl)
    ratios = [cg / ac for _, cg, ac, _ in rows if np.isfinite(cg / ac)]
    sys.stdout.write(
        "\n| model | castguard s | AutoCast s | floor s | vs AutoCast | vs floor |\n|---|---|---|---|---|---|\n"
    )
    for name, cg, ac, fl in rows:
        sys.stdout.write(f"| {name} | {cg:.2f} | {ac:.2f} | {fl:.2f} | {cg / ac:.2f}x | {cg / fl:.2f}x |\n")
    sys.stdout.write(
        f"\n[bench_convert] corpus: median {np.median(ratios):.2f}x AutoCast, max {max(ratios):.2f}x "
        f"({len(ratios)} models)\n"
    )
    assert ratios


# --- Conversion at deploy shapes (issue 26): castguard vs AutoCast vs one FP32 forward --------------------------


def test_deploy_shapes_wall_and_rss(tmp_path: Path) -> None:
    """The bundled BERT/LLaMA exports and a decoder built in code at 8 x 512 (benchmarks/deploy_shapes.py, which
    also runs alone: ``python benchmarks/deploy_shapes.py --help``); prints the table of walls, peak RSS, ratios."""
    sys.path.insert(0, str(Path(__file__).parent))
    from deploy_shapes import main  # type: ignore[import-not-found]

    out = tmp_path / "deploy.json"
    assert main(["--rounds", os.environ.get("CASTGUARD_BENCH_ROUNDS", "3"), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {row["model"].split(" at ")[0] for row in rows} == {"bert_tiny", "llama_tiny", "decoder 4x256"}
