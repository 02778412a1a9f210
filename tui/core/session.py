"""One controller session, the same for every front end: the launchers (a
:class:`~tui.launch.router.Router`), the :class:`~tui.core.supervisor.lifecycle.Supervisor`, the measured
traffic per ps (a :class:`~tui.core.traffic.TrafficMonitor`), and the start-up sweep for tasks
of earlier runs, whose findings arrive as :class:`~tui.core.events.Notice` events through the
supervisor's event stream like everything else.
Front ends send it :mod:`tui.core.commands`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path

from tui.core.commands import (
    Command,
    OpenTensorBoard,
    Relaunch,
    RestartTask,
    StartRun,
    StartTask,
    StopAll,
    StopTask,
)
from tui.core.events import Level
from tui.core.hosts import HostBoard
from tui.core.options import RunOptions
from tui.core.slow_link import SlowLinkWatch
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.tensorboard import TensorBoard, TensorBoardError
from tui.core.traffic import TrafficMonitor
from tui.core.usage import UsageMonitor
from tui.launch import leftovers
from tui.launch.router import Router


class Session:
    """A supervisor and what it runs tasks with. ``router``: the launchers, when the session
    made them (then it also sweeps for leftover tasks before the first run); ``traffic``:
    the monitor of each ps's TCP counters, subscribed to the supervisor (front ends read its
    latest sample and summary); ``tensorboard``: open TensorBoard for each run as it starts."""

    def __init__(self, supervisor: Supervisor, *, router: Router | None = None,
                 stop_leftovers: bool = False, traffic: TrafficMonitor | None = None,
                 usage: UsageMonitor | None = None, tensorboard: bool = False,
                 hosts: HostBoard | None = None) -> None:
        self.supervisor = supervisor
        self.traffic = traffic
        #: Each ps's link judged against what the placement needs of it (tui.core.slow_link).
        self.slow_links: SlowLinkWatch | None = None
        if traffic is not None:
            supervisor.subscribe(traffic.handle)
            self.slow_links = SlowLinkWatch(supervisor.report)
            supervisor.subscribe(self.slow_links.handle)
            traffic.subscribe(self.slow_links.sample)
        #: CPU and memory of each task (tui.core.usage), read by the app.
        self.usage = usage
        if usage is not None:
            supervisor.subscribe(usage.handle)
        #: Each remote host's state: its preparation, then its reach while a run is on.
        self.hosts = hosts
        if hosts is not None:
            supervisor.subscribe(hosts.handle)
        self._router = router
        self._stop_leftovers = stop_leftovers
        self._swept = False
        #: The TensorBoard this session owns (one at most), and whether each run opens it.
        self.tensorboard = TensorBoard()
        self._tensorboard_each_run = tensorboard
        self._opening: asyncio.Task[None] | None = None

    @classmethod
    def from_options(cls, options: RunOptions, supervisor_options: SupervisorOptions | None = None,
                     hosts: HostBoard | None = None) -> Session:
        """The session a command line asks for: local and SSH launchers with its host-key
        rules, a supervisor writing under its run directory, and the traffic monitor
        (reading counters with the same launchers). ``hosts``: the board of the config's
        hosts when the front end made it (and showed it) already."""
        router = Router.for_config(options.config, accept_new_host_keys=options.accept_new_host_keys,
                                   insecure_no_host_key_check=options.insecure_no_host_key_check,
                                   connect_timeout=options.connect_timeout, warm=not options.cold)
        supervisor = Supervisor(options.config, runs_root=options.runs_root, launcher=router,
                                options=supervisor_options or options.supervisor_options())
        router.on_notice(lambda text: supervisor.notify(Level.WARNING, text))
        if hosts is None:
            hosts = HostBoard(options.config, supervisor.announce)
        else:
            hosts.publish_to(supervisor.announce)
        router.on_host_step(hosts.step)
        return cls(supervisor, router=router, stop_leftovers=options.stop_leftovers, hosts=hosts,
                   tensorboard=options.tensorboard,
                   traffic=TrafficMonitor(options.config, router.run_command,
                                          open_command=router.open_command),
                   usage=UsageMonitor(options.config, router.run_command, open_command=router.open_command))

    async def sweep_leftovers(self) -> None:
        """Report (with ``--stop-leftovers``: stop) tasks of earlier runs still alive on the
        cluster's hosts, as warnings. Once a session."""
        if self._router is None or self._swept:
            return
        self._swept = True
        for line in await leftovers.sweep(self._router, self.supervisor.config, self._stop_leftovers):
            self.supervisor.notify(Level.WARNING, f"leftover tasks: {line}")

    async def start(self) -> None:
        """Sweep for leftovers (the first time), then start a run (see
        :meth:`Supervisor.start` for what it raises). This machine's warm pools start
        first: their import overlaps the sweep. The remote hosts are shown at once, before
        the first is contacted, and then as each one's preparation goes on."""
        if self.hosts is not None and not self._swept:
            self.hosts.begin()
        self.supervisor.prestart()
        if not self._swept:
            # The search and the preparation side by side: a host that does not answer holds
            # neither the other hosts' search nor their preparation (nothing starts a task
            # before both are done, and the search never stops what a live controller runs).
            await asyncio.gather(self.sweep_leftovers(), self.supervisor.prepare_hosts())
        await self.supervisor.start()
        if self._tensorboard_each_run:
            # In the background: TensorBoard takes seconds to serve, the run goes on meanwhile.
            self._opening = asyncio.ensure_future(self.open_tensorboard())

    async def open_tensorboard(self, run_dirs: Sequence[Path] = ()) -> None:
        """TensorBoard for ``run_dirs``, else the current (or last) run's directory; its
        address, or why there is none, comes as a notice."""
        current = self.supervisor.run_dir
        dirs = tuple(run_dirs) or ((current,) if current is not None else ())
        try:
            board = await self.tensorboard.open(dirs)
        except TensorBoardError as exc:
            self.supervisor.notify(Level.WARNING, f"TensorBoard: {exc}")
            return
        shown = ", ".join(d.name for d in board.run_dirs)
        self.supervisor.notify(Level.INFO, f"TensorBoard at {board.url} for {shown}")

    async def execute(self, command: Command) -> None:
        """Carry out one front-end command."""
        supervisor = self.supervisor
        if isinstance(command, StartRun):
            await self.start()
        elif isinstance(command, StartTask):
            await supervisor.start_task(command.task)
        elif isinstance(command, StopTask):
            await supervisor.stop_task(command.task)
        elif isinstance(command, RestartTask):
            await supervisor.restart_task(command.task)
        elif isinstance(command, StopAll):
            await supervisor.stop_all(command.outcome, command.reason)
        elif isinstance(command, Relaunch):
            await supervisor.relaunch(command.settings)
        elif isinstance(command, OpenTensorBoard):
            await self.open_tensorboard(command.run_dirs)

    async def close(self) -> None:
        """Stop any run, its traffic sampling and TensorBoard, and release the launchers."""
        if self._opening is not None:
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        await self.tensorboard.close()
        if self.traffic is not None:
            await self.traffic.close()
        if self.usage is not None:
            await self.usage.close()
        await self.supervisor.close()
