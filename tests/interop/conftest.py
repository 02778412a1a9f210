"""Fixtures of the interop tests: the real test Slurm (an exported sbatch script is run on it)."""

from tests.fixtures.slurm_fixture import slurm

__all__ = ["slurm"]
