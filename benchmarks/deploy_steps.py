"""A case at deploy shape step by step (issue 31): ``pytest`` in this process with a sampler thread that reads the
main thread's stack and the process's RSS every 50 ms, then wall seconds (sampled) and peak RSS per step of the
case (the innermost known castguard function on the stack). Pass pytest's own arguments after ``--``:

    python benchmarks/deploy_steps.py -- --model decoder=decoder.onnx --input-shapes input_ids:8x512 ...

Sampling under load misses some intervals, so the steps add up to less than the wall time; ``report.json``'s
``timings`` hold each step's exact seconds. No timed assertions.
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from types import FrameType

STEPS = (  # (function name, step) from the outermost: a later match inside an earlier one wins
    ("pytest_configure", "start-up: plan (model, feeds)"),
    ("check_fp32_golden", "test_fp32_golden: the FP32 forward again and its judge"),
    ("load_unlocked", "golden read"),
    ("save_unlocked", "golden write"),
    ("collect_magnitudes", "magnitudes (the converter's FP32 reference run)"),
    ("save_outputs", "save outputs (golden copy, case outputs)"),
    ("degenerate", "golden checks (degenerate outputs)"),
    ("convert_step", "convert"),
    ("execute_step", "execute on the runner"),
    ("judge_step", "judge"),
    ("diagnose_step", "diagnose"),
    ("divergence_profile", "diagnose: divergence profile"),
    ("verify_fix", "diagnose: verified fix"),
    ("time_step", "time"),
    ("record", "record"),
    ("pytest_sessionfinish", "report (json, md, html, plots)"),
)
NAMES = dict(STEPS)


def _step(frame: FrameType | None) -> str:
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    found = [n for n in reversed(names) if n in NAMES]  # outermost first
    return NAMES[found[-1]] if found else "start-up, collection, pytest"


def _rss_mb() -> int:
    with open("/proc/self/status") as status:
        return next((int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS")), 0)


def main(argv: list[str]) -> int:
    args = argv[argv.index("--") + 1 :] if "--" in argv else argv
    main_id = threading.main_thread().ident
    seconds: collections.Counter[str] = collections.Counter()
    peak: dict[str, int] = collections.defaultdict(int)
    done = threading.Event()

    def sample() -> None:
        last = time.perf_counter()
        while not done.wait(0.05):
            now = time.perf_counter()
            step = _step(sys._current_frames().get(main_id or 0))
            seconds[step] += now - last
            peak[step] = max(peak[step], _rss_mb())
            last = now

    thread = threading.Thread(target=sample, daemon=True)
    start = time.perf_counter()
    thread.start()
    import pytest

    code = pytest.main(args)
    done.set()
    thread.join()
    sys.stdout.write(
        f"\nwall {time.perf_counter() - start:.1f} s, exit {int(code)}\n| step | s | peak RSS MB |\n|---|---|---|\n"
    )
    for step, value in seconds.most_common():
        sys.stdout.write(f"| {step} | {value:.1f} | {peak[step]} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
