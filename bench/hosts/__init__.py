"""Benchmarks of runs over several real hosts (a lab of network-namespace hosts)."""
