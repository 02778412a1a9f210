"""Hosts that stop answering: their tasks are *unreachable*, not failed.

A link that is cut says nothing; only the host's beats stop (:mod:`tui.launch.ssh.host_link`).
What the controller does, host by host:

1. The host stops answering: its starting and running tasks become UNREACHABLE (the task
   table and the headless output say so, with one notice for the host). Nothing is stopped:
   the tasks of other hosts go on as they were.
2. It answers again before its tasks' lease ran out: they carry on where they were, over the
   same connection (their output, held back by TCP meanwhile, comes in).
3. It stays silent past the lease (and :data:`~tui.config.network.LEASE_MARGIN`): every task
   there has stopped itself, so the controller gives up on the connection. A task whose
   connection is lost (this way, or because it closed) waits for its host: the controller
   reconnects with backoff; once back, anything of the task still running there is stopped,
   and the restart policy judges the task as it would any failure (a worker restarts on its
   own, a ps restarts the cluster from its checkpoint).
4. A host unreachable for ``network: unreachable_timeout`` seconds fails the run, saying so.
"""

from __future__ import annotations

import asyncio
import time

from tui.config.network import LEASE_MARGIN
from tui.core.clock import Wake, first_completed
from tui.core.events import Level, RunOutcome
from tui.core.host_state import HostReach, HostState
from tui.core.supervisor.records import RunRecord, TaskRecord
from tui.core.task_state import TaskState
from tui.launch.base import HostLink, LaunchError, LinkWatching
from tui.launch.leftover_search import DEFAULT_STOP_GRACE
from tui.launch.router import LeftoverSearch

#: Seconds between reconnection attempts: doubling from the first, up to the last.
FIRST_RETRY = 2.0
LAST_RETRY = 10.0


def watch_links(run: RunRecord) -> None:
    """Watch every host of the run whose launcher knows whether it answers (a background
    task per host)."""
    launcher = run.launcher
    if not isinstance(launcher, LinkWatching):
        return
    for spec in {t.plan.host.name: t.plan.host for t in run.tasks.values()}.values():
        link = launcher.link(spec)
        if link is not None:
            run.links[spec.name] = link
            run.spawn(_watch_link(run, link))


def _on_host(run: RunRecord, host: str) -> list[TaskRecord]:
    return [t for t in run.tasks.values() if t.plan.host.name == host]


def _names(tasks: list[TaskRecord]) -> str:
    return ", ".join(t.name for t in tasks)


async def _watch_link(run: RunRecord, link: HostLink) -> None:
    silent_known = False
    while not run.stop_requested:
        change = link.changed()  # armed before looking, so that no change is missed
        silent = link.silent_for()
        if (silent is not None) is silent_known:
            wake = await first_completed({Wake.DONE: change, Wake.STOPPED: run.entered_ending()})
            if wake is not Wake.DONE:
                return
            continue
        close = getattr(change, "close", None)
        if close is not None:
            close()  # (a coroutine never awaited)
        silent_known = silent is not None
        if silent is not None:
            _went_silent(run, link, silent)
        else:
            _answers_again(run, link)


def mark_unreachable(run: RunRecord, task: TaskRecord, reason: str) -> bool:
    """A starting or running task whose host does not answer: UNREACHABLE (True), keeping
    where it was."""
    if task.state not in (TaskState.STARTING, TaskState.RUNNING):
        return False
    task.before_unreachable = task.state
    run.set_state(task, TaskState.UNREACHABLE, reason)
    return True


def reach(host: str) -> str:
    """What the notices of a host's reach are about (:attr:`tui.core.events.Notice.about`): a
    later one (it answers again, is reconnected) replaces an earlier (it does not answer)."""
    return f"host {host}"


def _tell(run: RunRecord, host: str, state: HostState, reason: str, heard: float | None = None) -> None:
    """The host's change of reach, for the model of the hosts both front ends show."""
    run.publish(HostReach(host=host, state=state, reason=reason, heard=heard))


def _went_silent(run: RunRecord, link: HostLink, silent: float) -> None:
    since = run.clock.monotonic() - silent
    _tell(run, link.host, HostState.UNREACHABLE, f"no answer for {silent:.0f} s", time.time() - silent)
    run.unreachable.setdefault(link.host, since)
    reason = f"host {link.host} does not answer"
    marked = [t for t in _on_host(run, link.host) if mark_unreachable(run, t, reason)]
    timeout = run.config.network.unreachable_timeout
    what = (f"{_names(marked)} {'keeps' if len(marked) == 1 else 'keep'} running there, for "
            f"{link.lease:g} s at most without the controller (the lease); " if marked else "")
    run.notify(Level.WARNING, f"host {link.host} ({link.where}) unreachable: no answer for {silent:.0f} s; "
               f"{what}the run fails if it stays unreachable for {timeout:g} s "
               f"(network: unreachable_timeout)", about=reach(link.host))
    run.spawn(_give_up_after_lease(run, link, run.unreachable[link.host]))


def _answers_again(run: RunRecord, link: HostLink) -> None:
    attempt = run.reconnecting.get(link.host)
    if attempt is not None and not attempt.done():
        return  # the host answers on the new connection: the reconnection says so, once
    since = run.host_answers(link.host)
    took = f" after {run.clock.monotonic() - since:.0f} s" if since is not None else ""
    back = []
    for task in _on_host(run, link.host):
        if task.state is TaskState.UNREACHABLE and not task.connection_lost:
            run.set_state(task, task.before_unreachable or TaskState.RUNNING)
            back.append(task)
    if since is None and not back:
        return  # a reconnection said so already
    carry = f"; {_names(back)} {'carries' if len(back) == 1 else 'carry'} on" if back else ""
    _tell(run, link.host, HostState.READY, f"answers again{took}")
    run.notify(Level.INFO, f"host {link.host} answers again{took}{carry}", about=reach(link.host))


async def _give_up_after_lease(run: RunRecord, link: HostLink, since: float) -> None:
    """Once the lease has surely run out, the host's tasks have stopped themselves: drop the
    connection, which reports them lost (and reconnects: :func:`task_lost`)."""
    gone_after = link.lease + LEASE_MARGIN
    wait = max(0.0, since + gone_after - run.clock.monotonic())
    wake = await first_completed({Wake.STOPPED: run.entered_ending(), Wake.TIMEOUT: run.clock.sleep(wait)})
    if wake is Wake.TIMEOUT and run.unreachable.get(link.host) == since and link.silent_for() is not None:
        run.notify(Level.WARNING, f"host {link.host} unreachable for {gone_after:g} s: its tasks have "
                   f"stopped themselves (their {link.lease:g} s lease ran out); reconnecting",
                   about=reach(link.host))
        _tell(run, link.host, HostState.LOST,
              f"past its {link.lease:g} s lease: its tasks stopped themselves")
        link.abandon()


def lease_ran_out(run: RunRecord, task: TaskRecord) -> bool:
    """The task's host has not answered for longer than the task's lease: an exit that comes
    now is the task stopping itself (its watcher's TERM, then KILL), not a fault of its own."""
    host = task.plan.host.name
    since, link = run.unreachable.get(host), run.links.get(host)
    return (task.state is TaskState.UNREACHABLE and since is not None and link is not None
            and run.clock.monotonic() - since >= link.lease)


def out_of_reach_note(run: RunRecord, task: TaskRecord) -> str:
    """For the reason of an exit that came while the task's host did not answer: that it
    did, and whether the task's lease had run out by then (it stopped itself)."""
    if task.state is not TaskState.UNREACHABLE:
        return ""
    link = run.links.get(task.plan.host.name)
    if link is None or not lease_ran_out(run, task):
        return " while its host was unreachable"
    return f" while its host was unreachable: its {link.lease:g} s lease had run out, so it stopped itself"


async def task_lost(run: RunRecord, task: TaskRecord, error: str) -> str:
    """The task's connection went before its exit came (``error``). Unless the run is ending
    or the task was being stopped, wait for its host (reconnecting) and stop what is left of
    the task there; return the reason its end is recorded with (its exit is unknown)."""
    task.connection_lost = True
    host = task.plan.host.name
    link = run.links.get(host)
    if link is None:
        return f"lost: {error}"
    if run.stop_requested or task.verdict is not None:
        return f"its host does not answer; there it stops itself within its {link.lease:g} s lease"
    since = run.unreachable.setdefault(host, run.clock.monotonic())
    mark_unreachable(run, task, f"its connection to host {host} was lost; reconnecting")
    _tell(run, host, HostState.UNREACHABLE, "its connection was lost; reconnecting")
    if run.reconnected_at.get(host, -1.0) > task.launched_at:
        back = True  # its connection was the one a reconnection has replaced already
    else:
        back = await _host_back(run, link, since, error)
    took = run.clock.monotonic() - since
    if not back:
        timeout = run.config.network.unreachable_timeout
        run.request_stop(RunOutcome.FAILED, f"host {host} ({link.where}) unreachable for more than "
                                            f"{timeout:g} s (network: unreachable_timeout)")
        return f"lost with host {host}, unreachable for more than {timeout:g} s"
    left = await _stop_leftover(run, task)
    what = "it was still running there and was stopped" if left else "it had stopped itself"
    return f"lost: its connection closed while host {host} was unreachable ({took:.0f} s); {what}"


async def _host_back(run: RunRecord, link: HostLink, since: float, error: str) -> bool:
    """Reconnect to the host (one attempt series per host, however many of its tasks wait)."""
    attempt = run.reconnecting.get(link.host)
    if attempt is None or attempt.done():
        timeout = run.config.network.unreachable_timeout
        run.notify(Level.WARNING, f"{error}; reconnecting (the run fails if host {link.host} stays "
                                  f"unreachable for {timeout:g} s: network: unreachable_timeout)",
                   about=reach(link.host))
        attempt = asyncio.ensure_future(_reconnect(run, link, since))
        run.reconnecting[link.host] = attempt
    return await asyncio.shield(attempt)


async def _reconnect(run: RunRecord, link: HostLink, since: float) -> bool:
    deadline = since + run.config.network.unreachable_timeout
    delay = FIRST_RETRY
    why = "no answer"
    while not run.stop_requested:
        remaining = deadline - run.clock.monotonic()
        if remaining <= 0:
            run.notify(Level.ERROR, f"host {link.host} still unreachable: {why}", about=reach(link.host))
            _tell(run, link.host, HostState.LOST, f"unreachable past network: unreachable_timeout: {why}")
            return False
        try:  # an attempt (a connect timeout, the host's checks) never runs past the limit
            wake = await first_completed({Wake.DONE: link.reconnect(), Wake.STOPPED: run.entered_ending(),
                                          Wake.TIMEOUT: run.clock.sleep(remaining)})
        except LaunchError as exc:
            why = str(exc)
        else:
            if wake is Wake.DONE:
                run.reconnected_at[link.host] = run.clock.monotonic()
                run.host_answers(link.host)
                _tell(run, link.host, HostState.READY,
                      f"reconnected after {run.clock.monotonic() - since:.0f} s")
                run.notify(Level.INFO, f"host {link.host} reconnected after "
                                       f"{run.clock.monotonic() - since:.0f} s", about=reach(link.host))
                return True
            if wake is Wake.STOPPED:
                return False
            continue
        remaining = deadline - run.clock.monotonic()
        wake = await first_completed({Wake.STOPPED: run.entered_ending(),
                                      Wake.TIMEOUT: run.clock.sleep(max(0.0, min(delay, remaining)))})
        if wake is Wake.STOPPED:
            return False
        delay = min(delay * 2, LAST_RETRY)
    return False


async def _stop_leftover(run: RunRecord, task: TaskRecord) -> bool:
    """Stop the task's process group on its host if it still runs there (its output is lost
    with its connection: it cannot carry on unwatched). Whether it did."""
    launcher = run.launcher
    if not isinstance(launcher, LeftoverSearch) or task.pid is None:
        return False
    try:
        found = await launcher.find_leftovers(task.plan.host)
        mine = [t for t in found if t.run_id == run.run_id and t.pgid == task.pid]
        if mine:
            await launcher.stop_leftovers(task.plan.host, mine, DEFAULT_STOP_GRACE)
    except LaunchError as exc:
        run.notify(Level.WARNING, f"could not look for what is left of it on {task.plan.host.name}: {exc}",
                   task.name)
        return False
    return bool(mine)
