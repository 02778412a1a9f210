"""Experiments over finished runs: the parameter grid of ``tfdist-tui sweep`` (:mod:`.sweep`),
finished run directories read back (:mod:`.finished_runs`), comparisons and their charts."""
