"""Model builders and sample data shared by the tests (no tests here)."""
