"""Queries in, ranked chunks out: query analysis, the one hybrid statement, re-rank, staleness."""
