"""The start-up sweep: tasks of earlier runs still alive on the cluster's hosts (a controller
that was SIGKILLed while a host was unreachable, say). Found ones are reported; with
``stop=True`` they are stopped. A task is only a leftover when the controller that started
it is gone (:mod:`tui.launch.owner`): the tasks of another controller's live run are left alone."""

from __future__ import annotations

from pathlib import Path

from tui.config.cluster import ClusterConfig
from tui.launch.leftover_search import LeftoverTask
from tui.launch.owner import Liveness, run_is_locked
from tui.launch.router import Router


def controller_gone(task: LeftoverTask, runs_root: Path) -> bool:
    """Whether ``task``'s controller is certainly gone. Its identity decides on the machine
    it ran on; elsewhere the run directory's lock does (no lock file: not certain)."""
    liveness = task.controller.liveness() if task.controller else Liveness.UNKNOWN
    if liveness is not Liveness.UNKNOWN:
        return liveness is Liveness.DEAD
    locked = run_is_locked(runs_root / task.run_id)
    if task.controller is None:
        return locked is not True  # a task from before controllers said who they are
    return locked is False


def _of_this_folder(task: LeftoverTask, runs_root: Path) -> bool:
    run_id = task.run_id
    if not run_id or "/" in run_id or run_id in (".", ".."):
        return False
    return (runs_root / run_id).is_dir()


async def sweep(router: Router, config: ClusterConfig, stop: bool,
                runs_root: Path | None = None) -> list[str]:
    """One line per finding, for a front end to show. ``runs_root`` is where run
    directories (and their locks) are; the config's run_dir by default."""
    root = runs_root or config.run_dir
    hosts = {t.host: config.host_of(t) for t in config.tasks}
    report = await router.sweep_hosts(hosts.values())
    lines = [f"cannot look for leftover tasks: {failure}" for failure in report.failures]
    # Only this folder's runs (their directories are in its run_dir): the tasks of another
    # folder's or another user's runs on the same machine are none of this run's business.
    ours = [t for t in report.tasks if _of_this_folder(t, root)]
    leftovers = [t for t in ours if controller_gone(t, root)]
    live_runs = sorted({(t.host, t.run_id, t.controller.pid if t.controller else None)
                        for t in ours if t not in leftovers}, key=str)
    for host_name, run_id, pid in live_runs:
        owner = f"controller pid {pid}" if pid is not None else "a controller"
        lines.append(f"host {host_name}: run {run_id} is still controlled by {owner}; left alone")
    for task in leftovers:
        lines.append(f"host {task.host}: pid {task.pid} of earlier run {task.run_id} is still "
                     f"running ({task.command[:120]})")
    if leftovers and not stop:
        lines.append("pass --stop-leftovers to stop them")
    if leftovers and stop:
        for name, host in hosts.items():
            mine = [t for t in leftovers if t.host == name]
            if mine:
                for stopped in await router.stop_leftovers(host, mine):
                    lines.append(f"host {name}: pid {stopped.task.pid}: {stopped.result.value}")
    return lines
