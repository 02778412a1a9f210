"""The start-up sweep: tasks of earlier runs still alive on the cluster's hosts (a controller
that was SIGKILLed while a host was unreachable, say). Found ones are reported; with
``stop=True`` they are stopped."""

from __future__ import annotations

from tui.config import ClusterConfig
from tui.launch.router import Router


async def sweep(router: Router, config: ClusterConfig, stop: bool) -> list[str]:
    """One line per finding, for a front end to show."""
    hosts = {t.host: config.host_of(t) for t in config.tasks}
    report = await router.sweep_hosts(hosts.values())
    lines = [f"cannot look for leftover tasks: {failure}" for failure in report.failures]
    for task in report.tasks:
        lines.append(f"host {task.host}: pid {task.pid} of earlier run {task.run_id} is still "
                     f"running ({task.command[:120]})")
    if report.tasks and not stop:
        lines.append("pass --stop-leftovers to stop them")
    if report.tasks and stop:
        for name, host in hosts.items():
            mine = [t for t in report.tasks if t.host == name]
            if mine:
                for stopped in await router.stop_leftovers(host, mine):
                    lines.append(f"host {name}: pid {stopped.task.pid}: {stopped.result.value}")
    return lines
