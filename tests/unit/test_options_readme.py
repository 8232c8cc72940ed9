"""`pytest --help` and the README's option tables say the same thing (issue 23 item 9).

Data-driven: every row of the README's ``| option | meaning |`` tables names options as ```--flag METAVAR```; a
new option needs a README row and nothing here. Checked, per option: it exists on both sides; the choices written
``a\\|b\\|c`` in the README are the option's metavar or choices; a default written ``(default `X`)`` in the README
is the help text's ``(default X``, and, where the code holds the default, the code's. The nightly rules table lists
every rule, and ``--fail-on-regression``'s help names every rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.config import HarnessConfig
from harness.convert.options import TARGETS
from harness.nightly.rules import METRIC_NAMES
from harness.options import HELP, MODEL_OPTIONS, NIGHTLY_OPTIONS, RUN_OPTIONS, SWEEP_OPTIONS, VERDICT_OPTIONS, Option
from harness.runners import RUNNER_NAMES
from harness.sweep import SweepSpec, format_number

README = Path(__file__).resolve().parents[2] / "README.md"
OPTIONS = {o.flag: o for o in (*MODEL_OPTIONS, *SWEEP_OPTIONS, *RUN_OPTIONS, *NIGHTLY_OPTIONS, *VERDICT_OPTIONS)}
_KEEP_IO = {(False,): "false", (True,): "true"}
CODE_DEFAULTS: dict[str, Callable[[], str]] = {  # where the code holds a default: the value it really uses
    "--runner": lambda: ",".join(SweepSpec().runners),
    "--precision": lambda: ",".join(SweepSpec().precisions),
    "--data-max": lambda: ",".join(format_number(v) for v in SweepSpec().data_max),
    "--init-max": lambda: ",".join(format_number(v) for v in SweepSpec().init_max),
    "--keep-io-types": lambda: _KEEP_IO.get(SweepSpec().keep_io_types, "both"),
    "--target": lambda: SweepSpec().target,
    "--fp32-casts": lambda: ",".join(SweepSpec().fp32_casts),
    "--seed": lambda: str(HarnessConfig().seed),
    "--iterations": lambda: str(HarnessConfig().iterations),
    "--ort-providers": lambda: ",".join(HarnessConfig().ort_providers),
    "--goldens-dir": lambda: f"{HarnessConfig().goldens_dir}/",
    "--report-dir": lambda: f"{HarnessConfig().report_dir}/",
    "--cache-dir": lambda: f"{HarnessConfig().cache_dir}/",
    "--keep-runs": lambda: str(HarnessConfig().keep_runs),
    "--cache-max-mb": lambda: str(HarnessConfig().cache_max_mb),
}
PLUGIN = "PLUGIN"  # the metavar's placeholder for an installed runner plugin's name
KNOWN_CHOICES = {"--runner": RUNNER_NAMES, "--target": TARGETS}  # registries the choices must equal


def _cells(line: str) -> list[str]:
    """A markdown table row's cells (``\\|`` inside a cell is a literal bar)."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def readme_rows() -> dict[str, tuple[str, str]]:
    """flag -> (metavar as written, meaning cell) for every row of the README's option tables."""
    rows: dict[str, tuple[str, str]] = {}
    in_table = False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("| option | meaning |"):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
        if not in_table or line.startswith("| ---"):
            continue
        first, meaning = _cells(line)[:2]
        for span in re.findall(r"`([^`]+)`", first):
            if span.startswith("--"):
                flag, _, metavar = span.partition(" ")
                assert flag not in rows, f"README: {flag} has two rows"
                rows[flag] = (metavar, meaning)
    return rows


ROWS = readme_rows()


def test_the_readme_and_the_options_name_the_same_options() -> None:
    assert len(ROWS) > 20
    assert sorted(set(OPTIONS) - set(ROWS)) == [], "options without a README row"
    assert sorted(set(ROWS) - set(OPTIONS)) == [], "README rows for options that do not exist"


def _choices(option: Option) -> set[str] | None:
    if option.choices:
        return set(option.choices)
    if option.metavar and "|" in option.metavar and not any(c in option.metavar for c in "[]="):
        return set(option.metavar.split("|"))
    return None


@pytest.mark.parametrize("flag", sorted(OPTIONS))
def test_choices_agree(flag: str) -> None:
    metavar, _ = ROWS[flag]
    option = OPTIONS[flag]
    ours = _choices(option)
    written = set(metavar.split("|")) if "|" in metavar and not any(c in metavar for c in "[]=") else None
    assert written == ours, f"{flag}: README says {metavar!r}, options.py {option.metavar or option.choices!r}"
    if flag in KNOWN_CHOICES:
        named = ours - {PLUGIN}  # PLUGIN: any installed runner plugin's name
        assert named == set(KNOWN_CHOICES[flag]), f"{flag}: the choices are not the registry's {KNOWN_CHOICES[flag]}"
    if option.metavar and not ours:  # same metavar on both sides
        assert metavar == option.metavar, f"{flag}: README {metavar!r}, --help {option.metavar!r}"


def _help_default(flag: str) -> str | None:
    match = re.search(r"\(default:? ([^\s;:),]+(?:,[^\s;:),]+)*)", HELP[flag])
    return match.group(1) if match else None


def _readme_default(flag: str) -> str | None:
    match = re.search(r"\(default `([^`]+)`", ROWS[flag][1])
    return match.group(1) if match else None


@pytest.mark.parametrize("flag", sorted(OPTIONS))
def test_defaults_agree_with_the_help_and_the_code(flag: str) -> None:
    readme, help_text = _readme_default(flag), _help_default(flag)
    assert readme == help_text, f"{flag}: README default {readme!r}, --help default {help_text!r}"
    if flag in CODE_DEFAULTS:
        assert readme == CODE_DEFAULTS[flag](), (
            f"{flag}: documented default {readme!r}, the code's {CODE_DEFAULTS[flag]()!r}"
        )


def test_every_nightly_rule_is_in_the_readme_table_and_the_help() -> None:
    text = README.read_text(encoding="utf-8")
    table = text.split("| rule | regression when |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)(?::[^`]*)?`", table))
    assert documented == set(METRIC_NAMES)
    help_rules = set(
        re.findall(r"\b([a-z_]+)(?::[-+][0-9.]+(?:%%|pp)?)?(?=,|$| \()", HELP["--fail-on-regression"].split(":", 1)[1])
    )
    assert set(METRIC_NAMES) <= help_rules, f"--help lacks {sorted(set(METRIC_NAMES) - help_rules)}"
