"""What a front end is asked to do: a validated command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tui.config.cluster import ClusterConfig
from tui.config.restart_policy import DEFAULT_STALL_TIMEOUT, StallPolicy
from tui.core.supervisor.records import SupervisorOptions
from tui.launch.base import DEFAULT_CONNECT_TIMEOUT
from tui.launch.router import Router


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

    def supervisor_options(self) -> SupervisorOptions:
        """How the front ends' supervisor runs tasks, as the command line says."""
        return SupervisorOptions(stall_timeout=self.stall_timeout, on_stall=self.on_stall)

    def launcher(self) -> Router:
        """Local tasks as processes, remote ones over SSH, with these host-key rules."""
        return Router.for_config(self.config, accept_new_host_keys=self.accept_new_host_keys,
                                 insecure_no_host_key_check=self.insecure_no_host_key_check,
                                 connect_timeout=self.connect_timeout)
