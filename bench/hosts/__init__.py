"""Benchmarks of clusters over many SSH hosts (a lab of network-namespace hosts)."""
