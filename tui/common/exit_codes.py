"""``tfdist-tui``'s exit codes, shared by every front end and subcommand (documented in
docs/exit-codes.md)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """``tfdist-tui``'s exit status (documented in docs/exit-codes.md)."""

    OK = 0             # training finished and every task exited cleanly
    TASK_FAILED = 1    # a task failed (its exit code and last lines are in the summary)
    USAGE = 2          # bad config, bad arguments, a port in use: nothing ran
    TIMEOUT = 3        # --timeout passed; every task was stopped
    INTERRUPTED = 130  # Ctrl-C or SIGTERM; every task was stopped
