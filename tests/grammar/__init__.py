"""Grammar stage tests."""
