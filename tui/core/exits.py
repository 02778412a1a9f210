"""How things end, said once: a task's exit (:class:`ExitInfo`), and the exit code every front
end returns for a run's outcome (:func:`exit_code_for`)."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass

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


#: A Python exception's last line: ``tensorflow.python...AbortedError: text``, or the bare
#: ``Exception: text`` of ``raise Exception(...)`` (Keras' failed download, users' own checks).
_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Z]\w*(?:Error|Exception|Exit)|Exception): (.*)")
#: The longest error text an exit's reason quotes.
ERROR_CHARS = 160


def last_error(lines: Iterable[str]) -> str:
    """The last exception a task's output names (``AbortedError: The same RunGraph ...``,
    without its module), or "": what an exit's reason says besides its code."""
    found = ""
    for line in lines:
        match = _ERROR_LINE.match(line.strip())
        if match:
            found = f"{match.group(1)}: {match.group(2)}"
    return found if len(found) <= ERROR_CHARS else found[:ERROR_CHARS] + "..."


def describe_exit(code: int) -> str:
    """``exited with code 2``, or ``was killed by SIGKILL`` for a negative code."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass(frozen=True)
class ExitInfo:
    """How one task's process ended: its exit code (None: unknown, or it never started) and
    the controller's reason. Every front end formats a task's end through it."""

    code: int | None
    reason: str = ""

    def how(self, unknown: str = "ended") -> str:
        """``exited with code 1`` / ``was killed by SIGTERM``; ``unknown`` without a code."""
        return describe_exit(self.code) if self.code is not None else unknown

    def detail(self, unknown: str = "ended") -> str:
        """How, then why: ``exited with code 1 (UnavailableError)``; a reason that already
        starts with how (the supervisor's own wording) is said once."""
        how = self.how(unknown)
        if self.reason.startswith(how):
            return self.reason
        return how + (f" ({self.reason})" if self.reason else "")
