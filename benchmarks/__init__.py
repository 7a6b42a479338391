"""Benchmark suite of gamebatch (run with `python -m benchmarks.run`)."""
