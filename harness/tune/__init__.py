"""``castguard tune``: accuracy-driven precision selection (the fewest FP32 nodes that meet an error bound).

Modules: ``bound`` (the bound and its measurement), ``probe`` (per-node sensitivity in one ORT run),
``oracle`` (one plan evaluation on ``emulate``, budget and memo), ``search`` (ranked prefix + group testing +
pruning), ``memo`` (the cache), ``stress`` (the hunt for an input over the bound: box corners, coordinate ascent,
Hypothesis), ``rounds`` (counterexample-guided rounds), ``plan`` (the JSON), ``engine`` (``tune``),
``cli`` (``castguard tune``).

The package re-exports nothing: castguard's public API is ``harness``'s (``castguard tune`` is the user's entry),
and importing the package loads none of its modules (the diagnosis reads ``bound`` without the tuning engine).
"""
