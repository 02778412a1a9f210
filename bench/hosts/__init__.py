"""Benchmarks over many hosts and links: a lab of namespace hosts, Slurm, placement on
capped links."""
