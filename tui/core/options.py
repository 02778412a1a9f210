"""What a front end is asked to do: a validated command line."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tui.config.cluster import ClusterConfig
from tui.config.restart_policy import DEFAULT_STALL_TIMEOUT, StallPolicy
from tui.core.supervisor.records import SupervisorOptions
from tui.launch.base import DEFAULT_CONNECT_TIMEOUT
from tui.plan.tasks import program_for
from tui.program.base import TaskProgram


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
    #: ``--anatomy``: headless prints each worker's sampled step anatomy as it comes.
    anatomy: bool = False
    #: ``--tensorboard``: TensorBoard for the run's directory, from its start to the end.
    tensorboard: bool = False

    def supervisor_options(self) -> SupervisorOptions:
        """How the front ends' supervisor runs tasks, as the command line says."""
        return SupervisorOptions(stall_timeout=self.stall_timeout, on_stall=self.on_stall,
                                 program=self.program)

    @cached_property
    def program(self) -> TaskProgram:
        """What the run's tasks run, decided once for every part that asks (the command
        line's warnings, the app's toggles, the supervisor)."""
        return program_for(self.config)
