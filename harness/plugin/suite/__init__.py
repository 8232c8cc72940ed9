"""The accuracy suite that ``pytest --model X`` collects (pytest-facing; parametrized by harness.plugin)."""
