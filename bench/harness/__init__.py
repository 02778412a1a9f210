"""What every benchmark shares: the measurement window, repetitions and ratios, the report's
figures and tables, and the processes a benchmark starts."""
