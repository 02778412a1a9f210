"""What a task runs: the task-program interface (:mod:`tui.program.base`), the built-in
trainer and the user's own program behind it, the ``program:`` section of hosts.yaml, its
placeholders, and metrics read from log text."""
