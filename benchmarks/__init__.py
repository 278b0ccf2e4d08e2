"""Benchmarks: `python -m benchmarks [--quick]` (see BENCHMARKS.md)."""
