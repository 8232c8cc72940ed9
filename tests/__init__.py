"""castguard's own tests; ``tests.helpers`` holds shared builders (not tests)."""
