"""What a front end is asked to do, and the exit codes every front end shares."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from tui.config import ClusterConfig
from tui.events import RunOutcome
from tui.launch.base import DEFAULT_CONNECT_TIMEOUT
from tui.launch.router import Router
from tui.restart_policy import DEFAULT_STALL_TIMEOUT, StallPolicy
from tui.supervision.records import SupervisorOptions


class ExitCode(IntEnum):
    """``tfdist-tui``'s exit status (documented in the README)."""

    OK = 0             # training finished and every task exited cleanly
    TASK_FAILED = 1    # a task failed (its exit code and last lines are in the summary)
    USAGE = 2          # bad config, bad arguments, a port in use: nothing ran
    TIMEOUT = 3        # --timeout passed; every task was stopped
    INTERRUPTED = 130  # Ctrl-C or SIGTERM; every task was stopped


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


@dataclass(frozen=True)
class RunOptions:
    """A validated command line: the config (overrides applied) and how to run it.
    ``tui.app.run(options) -> int`` and ``tui.headless.main(options) -> int`` take it."""

    config: ClusterConfig
    runs_root: Path
    timeout: float | None = None
    json_output: bool = False
    accept_new_host_keys: bool = False
    insecure_no_host_key_check: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    stop_leftovers: bool = False
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    on_stall: StallPolicy = StallPolicy.WARN
    #: ``--cold``: no warm pools; every task imports TensorFlow itself.
    cold: bool = False

    def supervisor_options(self) -> SupervisorOptions:
        """How the front ends' supervisor runs tasks, as the command line says."""
        return SupervisorOptions(stall_timeout=self.stall_timeout, on_stall=self.on_stall)

    def launcher(self) -> Router:
        """Local tasks as processes, remote ones over SSH, with these host-key rules."""
        return Router.for_config(self.config, accept_new_host_keys=self.accept_new_host_keys,
                                 insecure_no_host_key_check=self.insecure_no_host_key_check,
                                 connect_timeout=self.connect_timeout, warm=not self.cold)
