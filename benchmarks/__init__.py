"""Benchmarks of dasketch against its peers: ``python -m benchmarks.<script> [--quick]``."""
