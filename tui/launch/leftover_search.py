"""The start-up sweep: tasks of earlier runs still alive on a host.

Every task carries its run id in its environment (:data:`tui.plan.tasks.RUN_ID_ENV`). A task can
outlive its controller when it ignores stdin (started by hand, ``--watch-stdin no``) or hangs
in native code; such a task holds ports and GPU memory. :func:`find_leftovers` lists them so
a front end can offer to stop them; :func:`stop_leftovers` does. The work is done by the
``tasks`` snippet, run with ``python -c`` here or on a remote host.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tui.launch import snippets
from tui.launch.base import LaunchError
from tui.launch.owner import CONTROLLER_ENV, RUN_ID_ENV, ControllerId

DEFAULT_STOP_GRACE = 3.0
#: The snippet gives each task ``grace`` seconds, then 5 s after SIGKILL.
_STOP_SLACK = 15.0
_FIND_TIMEOUT = 30.0


@dataclass(frozen=True)
class LeftoverTask:
    """A live process of an earlier run on ``host``."""

    host: str
    pid: int
    pgid: int
    run_id: str
    cmdline: tuple[str, ...]
    #: The controller that started it (None for tasks of versions that did not say).
    controller: ControllerId | None = None

    @property
    def command(self) -> str:
        return " ".join(self.cmdline)

    def __str__(self) -> str:
        return f"{self.host}: pid {self.pid} of run {self.run_id}: {self.command}"


class StopResult(Enum):
    STOPPED = "stopped"    # exited after SIGTERM
    KILLED = "killed"      # needed SIGKILL
    GONE = "gone"          # already gone (or its pid now belongs to something else)
    SURVIVED = "survived"  # still alive after SIGKILL (stuck in the kernel, or not ours)


@dataclass(frozen=True)
class StoppedLeftover:
    task: LeftoverTask
    result: StopResult


def find_args(var: str = RUN_ID_ENV) -> list[str]:
    return ["find", var, CONTROLLER_ENV]


def stop_args(tasks: Sequence[LeftoverTask], grace: float, var: str = RUN_ID_ENV) -> list[str]:
    return ["stop", var, f"{grace:g}", *(f"{t.pid}={t.run_id}" for t in tasks)]


def stop_timeout(grace: float) -> float:
    return grace + _STOP_SLACK


def parse_found(host: str, answer: Any, exclude_run_ids: Iterable[str] = ()) -> list[LeftoverTask]:
    """The snippet's ``find`` answer as LeftoverTasks (runs in ``exclude_run_ids`` left out)."""
    if not isinstance(answer, list):
        raise LaunchError(f"host {host}: the sweep gave no answer")
    excluded = set(exclude_run_ids)
    found = []
    for item in answer:
        if not isinstance(item, Mapping) or item.get("run_id") in excluded:
            continue
        found.append(LeftoverTask(host=host, pid=int(item["pid"]), pgid=int(item["pgid"]),
                                  run_id=str(item["run_id"]),
                                  cmdline=tuple(str(a) for a in item.get("cmdline", ())),
                                  controller=ControllerId.parse(str(item.get("controller") or ""))))
    return sorted(found, key=lambda t: (t.run_id, t.pid))


def parse_stopped(host: str, tasks: Sequence[LeftoverTask], answer: Any) -> list[StoppedLeftover]:
    if not isinstance(answer, Mapping):
        raise LaunchError(f"host {host}: stopping the leftover tasks gave no answer")
    return [StoppedLeftover(t, StopResult(answer.get(str(t.pid), StopResult.SURVIVED.value)))
            for t in tasks]


async def _run_local(args: Sequence[str], timeout: float) -> Any:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", snippets.source("tasks"), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise LaunchError("localhost: the sweep did not finish in time") from None
    answer = snippets.parse_result(out.decode(errors="replace"))
    if answer is None:
        raise LaunchError(f"localhost: the sweep failed: {err.decode(errors='replace').strip()}")
    return answer


async def find_local_leftovers(host: str = "localhost",
                               exclude_run_ids: Iterable[str] = ()) -> list[LeftoverTask]:
    """Leftover tasks on this machine (only this user's, unless root)."""
    return parse_found(host, await _run_local(find_args(), _FIND_TIMEOUT), exclude_run_ids)


async def stop_local_leftovers(tasks: Sequence[LeftoverTask],
                               grace: float = DEFAULT_STOP_GRACE) -> list[StoppedLeftover]:
    """SIGTERM each task's process group, SIGKILL after ``grace`` seconds."""
    if not tasks:
        return []
    answer = await _run_local(stop_args(tasks, grace), stop_timeout(grace))
    return parse_stopped(tasks[0].host, tasks, answer)
