"""Benchmarks: scripts that measure speed and accuracy against peers in the same run."""
