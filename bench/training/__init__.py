"""Benchmarks of training: throughput under supervision, scaling, a step's profile, warm
start, the seed-style program, sync end, placement and users' own programs."""
