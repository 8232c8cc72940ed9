"""The FP32 model and its conversion run side by side, one feed at a time, for the adversarial search. No pytest.

The runner half of the paired judge: :class:`PairedRun` keeps both sessions open and hands each feed's two
outputs to the pure :func:`harness.judge.paired.judge_feed`. The golden side is ORT CPU FP32 (the golden
producer); the converted side runs on a rounding runner (``emulate`` by default), never on a runner that computes
low precision in fp32.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

import onnx

from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.judge.paired import Verdict, judge_feed
from harness.judge.tolerances import TolerancePolicy
from harness.runners import Runner, make_runner

__all__ = ["PairedRun"]


class PairedRun:
    """FP32 golden vs converted model, one feed at a time; both sessions stay open inside ``with``.

    Feeds are in the converted model's input dtypes; the golden gets them widened exactly to its own.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        converted: onnx.ModelProto,
        *,
        precision: str,
        policy: TolerancePolicy = TolerancePolicy(),
        runner: str = "emulate",
        model_dir: Path | None = None,
        converted_dir: Path | None = None,
    ) -> None:
        self.precision, self.policy, self.runner = precision, policy, runner
        self._golden_specs = input_specs(model)
        self._golden: Runner = make_runner("ort", model, model_dir=model_dir)
        self._low: Runner = make_runner(runner, converted, model_dir=converted_dir or model_dir)

    def __enter__(self) -> PairedRun:
        self._golden.activate()
        try:
            self._low.activate()
        except BaseException:
            self._golden.deactivate()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._low.deactivate()
        self._golden.deactivate()

    def golden_feed(self, feed: Feed) -> Feed:
        return cast_feeds([feed], self._golden_specs)[0]

    def __call__(self, feed: Feed) -> Verdict:
        golden = self._golden.infer(self.golden_feed(feed))
        obtained = self._low.infer(feed)
        return judge_feed(obtained, golden, precision=self.precision, policy=self.policy)
