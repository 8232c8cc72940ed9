"""The ``autocast`` converter for real (issue 30): needs nvidia-modelopt's ONNX extra (``castguard[autocast]``;
the CI leg ``.ci/legs/60-autocast.sh`` installs it). Skipped, with the reason, where it is not installed.

* an autocast case's converted model equals what ``python -m modelopt.onnx.autocast`` writes with the same
  arguments and the same calibration data: same nodes, types and initializers;
* that case's verdict equals castguard's verdict on the CLI's file given as ``--candidate``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from harness.convert.dispatch import run_converter
from harness.convert.options import ConvertOptions
from harness.convert.plugins import ConvertRequest
from tests.integration.test_any_folder import pytest_in

pytest.importorskip("modelopt.onnx.autocast", reason='needs nvidia-modelopt: pip install "castguard[autocast]"')

BERT = Path(__file__).resolve().parents[2] / "test_models" / "bert_tiny"


def _cli(tmp: Path, *args: str) -> onnx.ModelProto:
    out = tmp / "bert_tiny.autocast.onnx"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "modelopt.onnx.autocast",
            "--onnx_path",
            str(tmp / "bert_tiny.onnx"),
            "--output_path",
            str(out),
            "--calibration_data",
            str(tmp / "calib.npz"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return onnx.load(str(out))


def _same(ours: onnx.ModelProto, theirs: onnx.ModelProto) -> None:
    def nodes(m: onnx.ModelProto) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...], bytes]]:
        return [
            (n.op_type, n.domain, tuple(n.input), tuple(n.output), b"".join(a.SerializeToString() for a in n.attribute))
            for n in m.graph.node
        ]

    def types(m: onnx.ModelProto) -> dict[str, int]:
        g = m.graph
        return {v.name: v.type.tensor_type.elem_type for v in (*g.input, *g.output, *g.value_info)}

    def inits(m: onnx.ModelProto) -> dict[str, tuple[int, bytes]]:
        return {t.name: (t.data_type, numpy_helper.to_array(t).tobytes()) for t in m.graph.initializer}

    assert nodes(ours) == nodes(theirs)
    assert types(ours) == types(theirs)
    assert inits(ours) == inits(theirs)


@pytest.mark.parametrize(
    ("options", "flags"),
    [
        (ConvertOptions(data_max=512.0), ["--data_max", "512"]),
        (
            ConvertOptions(
                low_precision_type="bf16",
                data_max=8.0,
                keep_io_types=True,
                op_types_to_exclude=("Softmax", "LayerNormalization"),
            ),
            [
                "-t",
                "bf16",
                "--data_max",
                "8",
                "--keep_io_types",
                "--op_types_to_exclude",
                "Softmax",
                "LayerNormalization",
            ],
        ),
    ],
)
def test_an_autocast_case_equals_the_autocast_cli(tmp_path: Path, options: ConvertOptions, flags: list[str]) -> None:
    shutil.copy(BERT / "bert_tiny.onnx", tmp_path / "bert_tiny.onnx")
    feeds = dict(np.load(BERT / "inputs.npz"))
    np.savez(tmp_path / "calib.npz", **feeds)
    request = ConvertRequest(
        model=onnx.load(str(tmp_path / "bert_tiny.onnx")),
        model_path=tmp_path / "bert_tiny.onnx",
        options=options,
        calibration=(feeds,),
    )
    ours = run_converter("autocast", request)
    assert "converted by autocast" in ours.notes
    _same(ours.model, _cli(tmp_path, *flags))


def test_an_autocast_verdict_equals_the_verdict_on_its_cli_file_as_candidate(tmp_path: Path) -> None:
    shutil.copy(BERT / "bert_tiny.onnx", tmp_path / "bert_tiny.onnx")
    np.savez(tmp_path / "calib.npz", **dict(np.load(BERT / "inputs.npz")))
    _cli(tmp_path, "--data_max", "512")
    folder = tmp_path / "empty folder"
    folder.mkdir()
    args = [
        "--model",
        "bert_tiny",
        "--converter",
        "autocast",
        "--precision",
        "fp16",
        "--data-max",
        "512",
        "--exclude-ops",
        "none",
        "--candidate",
        f"bert_tiny={tmp_path / 'bert_tiny.autocast.onnx'}",
    ]
    pytest_in(folder, *args)  # the golden
    done = pytest_in(folder, *args)
    cases = {c["case_id"]: c for c in json.loads((folder / "castguard-report" / "report.json").read_text())["cases"]}
    ours, theirs = cases["autocast-fp16-dmax512-imax65504-excl_none-keepio0-emulate"], cases["candidate-emulate"]
    assert ours["status"] == theirs["status"] and ours["status"] in ("pass", "fail"), done.stdout[-3000:]
    assert [o["max_abs"] for o in ours["outputs"]] == [o["max_abs"] for o in theirs["outputs"]]
    assert ours["lowp_flop_share"] == theirs["lowp_flop_share"]
