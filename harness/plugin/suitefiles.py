"""The packaged suite's files: what pytest collects with ``--model`` and no test paths (:func:`suite_args`), and a
suite test id pytest printed, pasted back as an argument, pointed at its file (:func:`suite_arg`)."""

from __future__ import annotations

from pathlib import Path

import pytest

SUITE_FILE = Path(__file__).resolve().parent / "suite" / "test_castguard.py"
ADVERSARIAL_FILE = SUITE_FILE.with_name("test_adversarial.py")  # opt-in: -m adversarial (minutes per model)
TUNED_FILE = SUITE_FILE.with_name("test_tuned.py")  # opt-in: --tune / [tool.castguard] tune


SUITE_TESTS = {
    "test_fp32_golden": SUITE_FILE,
    "test_low_precision": SUITE_FILE,
    "test_adversarial": ADVERSARIAL_FILE,
    "test_tuned": TUNED_FILE,
}


def suite_arg(arg: str, *, invocation_dir: Path) -> str:
    """A test id pytest printed for the packaged suite (``::test_low_precision[mnist-fp16-...]``, or with the
    file's path) pasted back as an argument: pointed at the suite file. Other arguments are left alone."""
    path, sep, rest = arg.partition("::")
    name = rest.split("[", 1)[0]
    if (
        not sep
        or name not in SUITE_TESTS
        or (path and (invocation_dir / path).is_file() and Path(path).name != SUITE_TESTS[name].name)
    ):
        return arg
    return f"{SUITE_TESTS[name]}::{rest}"


def suite_args(config: pytest.Config, *, tune: bool) -> list[str]:
    """No test paths given: the packaged suite (with --tune the tuned cases, with -m adversarial the search);
    suite test ids pasted back as arguments: pointed at the suite file."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        adversarial = "adversarial" in (config.option.markexpr or "")
        return [
            str(SUITE_FILE),
            *([str(TUNED_FILE)] if tune else []),
            *([str(ADVERSARIAL_FILE)] if adversarial else []),
        ]
    return [suite_arg(arg, invocation_dir=config.invocation_params.dir) for arg in config.args]
