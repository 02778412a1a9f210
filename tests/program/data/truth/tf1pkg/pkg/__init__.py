"""A TF1 training package, run as ``python -m pkg.train``."""
