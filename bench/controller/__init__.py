"""Benchmarks of the controller's own cost: time to first step, the log flood and pipe, the
app's start and scale, the placement preview's latency, many tasks watched at once."""
