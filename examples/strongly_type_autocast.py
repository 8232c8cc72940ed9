"""TensorRT's ``strongly_type_autocast`` sample, on castguard: FP32 MNIST -> mixed FP32/FP16 -> strongly typed engine.

    python examples/strongly_type_autocast.py --mnist_dir test_models/mnist [--working_dir DIR]

The stages, messages and exit codes follow the TensorRT sample (``samples/python/strongly_type_autocast``):

1. the ten ``<digit>.pgm`` files become ``<digit>.npz`` (``Input3 = 1 - pixels/255``, shape 1x1x28x28); ONNX
   Runtime runs the FP32 model on them (CPU, FP32: the gold reference) and every digit must be predicted;
2. castguard's AutoCast-compatible converter converts the model with the sample's exact arguments, using
   ``8.npz`` as calibration data; the converted model runs on castguard's ``emulate`` runner (every fp16
   tensor really rounded; ORT's CPU provider would compute the fp16 parts in fp32 and prove nothing), must
   still predict every digit and match the gold outputs with ``np.allclose(rtol=5e-3, atol=5e-3)``;
3. a strongly typed engine is built from the converted model with TensorRT (full TensorRT, or TensorRT-RTX from
   ``pip install "castguard[trt]"``, which builds on any machine, no GPU needed) and the type TensorRT gave every
   node output is checked against the ONNX type; the engine is saved. Then it is run and checked like stage 2
   (and its per-layer precisions against the ONNX types) where this machine can run it; where it cannot (no GPU,
   no CUDA library, or a GPU the engine does not support, e.g. TensorRT-RTX on a Hopper GPU) the sample says
   exactly why. Without any TensorRT the stage is skipped, saying why.

Any failure prints ``ERROR: ...`` and exits 1; success ends with ``Sample finished successfully.``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from harness import HarnessError, Runner, RunnerUnavailable, convert_to_mixed_precision, make_runner
from harness.bundled_models.artifacts import read_pgm
from harness.bundled_models.mnist_train import model_input
from harness.runners.tensorrt.typed_build import check_build

INPUT, OUTPUT = "Input3", "Plus214_Output_0"
TOLERANCE = 5e-3


class SampleError(Exception):
    """A failed check: printed as ``ERROR: <message>``, exit status 1."""


class Sample:
    """The three stages of the TensorRT sample, with castguard's converter and runners."""

    def __init__(self, mnist_dir: Path, working_dir: Path) -> None:
        for folder in (mnist_dir, working_dir):
            if not folder.exists():
                raise SampleError(f"{folder} is not existed.")
        self.mnist_dir = mnist_dir
        self.working_dir = working_dir
        self.origin_onnx_path = mnist_dir / "mnist.onnx"
        self.converted_onnx_path = working_dir / "mnist_converted.onnx"
        self.trt_engine_path = working_dir / "mnist_converted.engine"
        self.origin_output_path = working_dir / "origin_output.npz"
        self.converted_output_path = working_dir / "converted_output.npz"
        self.trt_output_path = working_dir / "trt_output.npz"

    def prepare_input_npz(self) -> None:
        print("Start prepare input data in npz format.")
        for digit in range(10):
            path = self.working_dir / f"{digit}.npz"
            np.savez(path, allow_pickle=False, **{INPUT: model_input(read_pgm(self.mnist_dir / f"{digit}.pgm"))})
            print(f"Saved input number {digit} to {path}.")

    def feeds(self) -> list[dict[str, np.ndarray]]:
        feeds = []
        for digit in range(10):
            with np.load(self.working_dir / f"{digit}.npz", allow_pickle=False) as npz:
                feeds.append({INPUT: npz[INPUT]})
        return feeds

    def infer_with_runner(self, runner: Runner, output_path: Path) -> None:
        outputs = runner.run(self.feeds()).outputs
        all_passed = True
        for digit, output in enumerate(outputs):
            inferred = int(np.argmax(output[OUTPUT]))
            all_passed &= inferred == digit
            print(
                f"Input number is {digit}, inferred number is {inferred}, "
                f"{'passed' if inferred == digit else 'failed'}."
            )
        if not all_passed:
            raise SampleError("Number infer test failed.")
        print("Number infer test passed.")
        np.savez(output_path, allow_pickle=False, **{OUTPUT: np.concatenate([o[OUTPUT] for o in outputs])})
        print(f"Saved all outputs to {output_path}, infer stage finished.")

    def check_accuracy(self, reference_path: Path, output_path: Path) -> None:
        print(f" Comparing '{reference_path}' and '{output_path}' with rtol({TOLERANCE})+a_tol({TOLERANCE})...")
        with np.load(reference_path, allow_pickle=False) as ref, np.load(output_path, allow_pickle=False) as out:
            matches = np.allclose(ref[OUTPUT], out[OUTPUT], rtol=TOLERANCE, atol=TOLERANCE)
        if not matches:
            raise SampleError("Outputs and references mismatches.")
        print("Outputs and references matches.")

    def convert_model(self) -> onnx.ModelProto:
        print(f"Start autocast on {self.origin_onnx_path}.")
        print("Use 8.npz as input data file for reference runner.")
        converted = convert_to_mixed_precision(
            onnx_path=str(self.origin_onnx_path),
            low_precision_type="fp16",
            nodes_to_exclude=["Plus214"],
            op_types_to_exclude=["MatMul"],
            data_max=4,
            init_max=4,
            keep_io_types=True,
            calibration_data=str(self.working_dir / "8.npz"),
        )
        onnx.save(converted, self.converted_onnx_path)
        print(f"Saved converted model to {self.converted_onnx_path}, autocast stage finished.")
        return converted

    def run_trt(self, converted: onnx.ModelProto) -> None:
        print(f"Start build trt engine on {self.converted_onnx_path}.")
        try:
            build = check_build(converted, model_dir=self.working_dir, plan_out=self.trt_engine_path)
        except RunnerUnavailable as err:
            print(f"STAGE 3 skipped: no TensorRT engine can be built here ({err}).")
            return
        print(f"TensorRT build: {build.summary()} ({build.checked} node output types checked).")
        if not build.ok:
            raise SampleError(f"TensorRT cannot build the converted model as typed: {build.summary()}")
        print(f"Saved trt engine to {self.trt_engine_path}.")
        print("Start trt infer on the engine.")
        runner = make_runner("trt", converted, model_dir=self.working_dir)
        try:
            self.infer_with_runner(runner, self.trt_output_path)
        except RunnerUnavailable as err:
            print(f"STAGE 3 verify skipped: the engine cannot run here ({err}).")
            return
        mismatches = runner.check_precisions()  # type: ignore[attr-defined]
        if mismatches:
            raise SampleError("TensorRT changed precisions: " + "; ".join(map(str, mismatches)))
        self.check_accuracy(self.origin_output_path, self.trt_output_path)

    def run(self) -> None:
        print("STAGE 1: Prepare input data, do inference with onnx runtime on original fp32 onnx model.")
        self.prepare_input_npz()
        print(f"Start onnxruntime infer on {self.origin_onnx_path}.")
        self.infer_with_runner(make_runner("ort", onnx.load(self.origin_onnx_path)), self.origin_output_path)

        print(
            "STAGE 2: Convert original fp32 onnx model to fp32-fp16 mixed onnx model, do inference with the "
            "emulate runner (fp16 really rounded) on converted onnx model, and check accuracy."
        )
        converted = self.convert_model()
        print(f"Start emulate infer on {self.converted_onnx_path}.")
        self.infer_with_runner(make_runner("emulate", converted), self.converted_output_path)
        self.check_accuracy(self.origin_output_path, self.converted_output_path)

        print(
            "STAGE 3: Build trt engine on the converted onnx model with strong typing mode, do inference with "
            "trt runtime on the engine, and check accuracy."
        )
        self.run_trt(converted)
        print("Sample finished successfully.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Convert an FP32 ONNX model to mixed FP32-FP16 precision for "
        "TensorRT strong typing, checked with castguard."
    )
    parser.add_argument(
        "--mnist_dir",
        type=Path,
        required=True,
        help="folder with mnist.onnx, 0.pgm ... 9.pgm (castguard's: test_models/mnist)",
    )
    parser.add_argument(
        "--working_dir",
        type=Path,
        default=Path.cwd(),
        help="folder for the .npz inputs, outputs and converted model (default: current folder)",
    )
    args = parser.parse_args(argv)
    try:
        Sample(args.mnist_dir, args.working_dir).run()
    except (SampleError, HarnessError) as err:
        print(f"ERROR: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
