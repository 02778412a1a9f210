"""The Slurm launcher: an allocation (``salloc``) and one job step per task."""
