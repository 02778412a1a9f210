"""Hosts that failed their preparation (hosts.yaml ``network.on_host_failure``): by default
the run fails before anything starts; with ``start_without`` it starts without their tasks
where the cluster can train without them, and says so. It can when every such task is a
worker other than the chief (a ps holds a share of the variables, the chief initialises the
model: without either nothing trains), each has a fixed port (its address stays in every
task's cluster spec, so that the others' indices keep their meaning; an ``auto`` port has no
address without its host), and the run is asynchronous (sync mode waits for every worker's
gradients each step: one missing stalls them all)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainer.settings import Mode, TrainingSettings
from tui.config.cluster import ClusterConfig, Job
from tui.config.network import OnHostFailure
from tui.launch.base import LaunchError
from tui.launch.errors import HostError
from tui.plan.preflight import PreflightError

SETTING = "network.on_host_failure: start_without"


@dataclass(frozen=True)
class LeftOut:
    """The tasks a run starts without (their hosts failed), and the warning that says so."""

    tasks: frozenset[str]
    notice: str


def leave_out(config: ClusterConfig, settings: TrainingSettings, failures: Sequence[LaunchError]) -> LeftOut:
    """The tasks to start without, given the hosts that failed (``failures``). Raises
    :class:`PreflightError` with every failure when the run must not start, and why it
    cannot start without them where the setting asked it to."""
    problems = [str(f) for f in failures]
    if config.network.on_host_failure is OnHostFailure.FAIL:
        raise PreflightError(problems)
    hosts = {f.host for f in failures if isinstance(f, HostError)}
    if len(hosts) < len(failures):
        raise PreflightError([*problems, f"{SETTING}: not every failure is a host's, so the run "
                                         f"does not start"])
    tasks = [t for t in config.tasks if t.host in hosts]
    chief = config.chief
    vital = [t.name for t in tasks if t.job is not Job.WORKER or t.name == chief.name]
    if vital:
        raise PreflightError([*problems, f"{SETTING}: the run cannot start without {', '.join(vital)} "
                                         f"(only workers other than the chief can be left out)"])
    auto = [t.name for t in tasks if t.port is None]
    if auto:
        raise PreflightError([*problems, f"{SETTING}: {', '.join(auto)} on port auto: the cluster "
                                         f"has no address for a task without its host"])
    if settings.mode is Mode.SYNC:
        raise PreflightError([*problems, f"{SETTING}: sync mode waits for every worker's gradients each "
                                         f"step, so the run cannot start without a worker"])
    names = ", ".join(t.name for t in tasks)
    return LeftOut(frozenset(t.name for t in tasks),
                   f"started without {names}: {'; '.join(problems)} ({SETTING}); a relaunch tries "
                   f"{'its host' if len(hosts) == 1 else 'their hosts'} again")
