"""Helpers shared by the tests: sample trees, the kill loop."""
