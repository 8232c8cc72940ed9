"""setuptools' ``build_py``, narrowed to what an installed castguard imports (everything else is in pyproject.toml).

The bundled models install as ``harness.bundled_models`` from ``test_models/`` (pyproject.toml
``[tool.setuptools.package-dir]``). The wheel takes that folder's registry (``__init__.py``: names, files, default
inputs; numpy-free) and the models' files, but not the scripts beside them that build those files
(``build.py``, ``mnist_train.py`` needing scikit-learn, ``make_real_exports.py`` needing torch and transformers,
...): they run from the repository (``python -m test_models.build``), and setuptools has no declarative way to
leave modules of a package out. tests/unit/test_packaging.py builds the wheel and checks its file list.
"""

from __future__ import annotations

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED_MODULES = {"harness.bundled_models": {"__init__"}}
"""Per package, the only modules the wheel takes (a package not named here ships all of its modules)."""


class BuildPy(build_py):
    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        shipped = SHIPPED_MODULES.get(package)
        return modules if shipped is None else [m for m in modules if m[1] in shipped]


setup(cmdclass={"build_py": BuildPy})
