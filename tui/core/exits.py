"""The one mapping from a run's outcome to the exit code every front end returns."""

from __future__ import annotations

from tui.common.exit_codes import ExitCode
from tui.core.events import RunOutcome


def exit_code_for(outcome: RunOutcome) -> ExitCode:
    """The exit status for a run that ended with ``outcome``."""
    return {
        RunOutcome.SUCCEEDED: ExitCode.OK,
        RunOutcome.FAILED: ExitCode.TASK_FAILED,
        # Tasks stopped without anyone asking the headless front end: not a clean run.
        RunOutcome.STOPPED: ExitCode.TASK_FAILED,
        RunOutcome.TIMEOUT: ExitCode.TIMEOUT,
        RunOutcome.INTERRUPTED: ExitCode.INTERRUPTED,
    }[outcome]
