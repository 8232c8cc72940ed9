"""``HarnessConfig``: one frozen configuration from ``[tool.castguard]`` (pyproject.toml) and the command line.

Precedence: command line > ``[tool.castguard]`` in the project's pyproject.toml > the dataclass defaults.
The project is found from the invocation directory (:func:`find_project`). Paths from pyproject are relative
to the project folder; paths from the command line to the invocation directory.
The keys read here are :data:`harness.options.DESTS` except :data:`CLI_ONLY` (``--model`` decides what
pytest collects, and a permanent ``--update-goldens`` would rewrite goldens on every run), plus two tables:

* ``[tool.castguard.sweep]`` -> :attr:`HarnessConfig.sweep`, layered by :func:`harness.sweep.build_sweep_spec`:
  defaults < ``[tool.castguard] runners`` < ``[tool.castguard.sweep]`` < ``--sweep FILE`` < sweep options;
* ``[tool.castguard.tolerances]`` -> :attr:`HarnessConfig.tolerances` (:func:`harness.judge.tolerances.parse_tolerance_policy`).

Other keys of ``[tool.castguard]`` belong to other parts of castguard and are left to them.
"""

from harness.config.project import TABLE_KEYS, find_project, load_table
from harness.config.settings import CLI_ONLY, HarnessConfig

__all__ = ["CLI_ONLY", "TABLE_KEYS", "HarnessConfig", "find_project", "load_table"]
