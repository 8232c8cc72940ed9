"""Compatibility shim: findings saved before the stage layout embed ``python -m harness.adversarial replay FILE``.

The search lives in :mod:`harness.pipeline.hunt`; new findings say ``castguard replay FILE``.
"""
