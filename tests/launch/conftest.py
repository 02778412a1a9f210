"""Fixtures of the launcher tests: the real test Slurm."""

from tests.fixtures.slurm_fixture import slurm

__all__ = ["slurm"]
