"""Runner speed on the bundled mnist (figures, not assertions): ``pytest benchmarks/test_runners_bench.py``.

Compares one inference of the FP32 model on ORT CPU with the fp16 model (converter defaults) on ``ort``,
``emulate`` and ``reference``, plus the one-off cost of building the emulation model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.data.feeds import cast_feeds, input_specs
from harness.data.models import bundled_models_dir, resolve_model
from harness.data.onnxfile import load_model
from harness.runners import make_runner
from harness.runners.emulate import emulation_model


@pytest.fixture(scope="module")
def mnist() -> dict[str, Any]:
    spec = resolve_model("mnist", search_dir=bundled_models_dir())
    model = load_model(spec.path)
    with np.load(spec.path.parent / "digits.npz", allow_pickle=False) as data:
        x = data["Input3"][:1].astype(np.float32)
    fp16 = convert(model, options=ConvertOptions(), magnitudes=collect_magnitudes(model, feeds=[{"Input3": x}]))
    feed16 = cast_feeds([{"Input3": x}], input_specs(fp16.model))[0]
    return {"fp32": model, "fp16": fp16.model, "feed32": {"Input3": x}, "feed16": feed16}


@pytest.mark.parametrize(
    ("runner", "variant"), [("ort", "fp32"), ("ort", "fp16"), ("emulate", "fp16"), ("reference", "fp16")]
)
def test_infer(benchmark: Any, mnist: dict[str, Any], runner: str, variant: str) -> None:
    feed = mnist["feed32"] if variant == "fp32" else mnist["feed16"]
    with make_runner(runner, mnist[variant]) as active:
        outputs = benchmark(active.infer, feed)
    assert outputs["Plus214_Output_0"].shape == (1, 10)


def test_build_emulation_model(benchmark: Any, mnist: dict[str, Any]) -> None:
    emu = benchmark(emulation_model, mnist["fp16"])
    assert len(emu.graph.node) > len(mnist["fp16"].graph.node)
