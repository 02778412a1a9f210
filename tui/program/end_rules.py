"""Ending a user's program cleanly whatever it does: what says its training is over
(:class:`RunEnd`: every worker, or the ``chief`` job's task), the sync chief's hang after its
last step (tensorflow#13779), and a ps's port probed for readiness. Pure rules and
bookkeeping plus one small probe; the supervisor acts on the answers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from tui.config.cluster import Job
from tui.program.base import PsEnding

#: Once the target step is reached, a worker whose global step has not advanced for this
#: long is ended (and counted as succeeded) unless its processes are busy: well inside the
#: 10 s the product promises.
HANG_AFTER = 5.0
#: The last seconds of :data:`HANG_AFTER`, over which a candidate's CPU time is sampled
#: (:mod:`tui.core.supervisor.busy`); its clock ticks are 1/100 s, so 2 s resolve 0.5 % of a core.
CPU_SAMPLE = 2.0
#: How often a task's port is tried while it is starting.
PORT_PROBE_INTERVAL = 0.25


class RunEnd(Enum):
    """The rule for when a run's training is over, and so when the tasks that only serve it
    are ended (each counted as succeeded; one that had exited keeps its own verdict).

    :meth:`of` picks it from the cluster's jobs; :meth:`trains` says which tasks the run waits
    for, :meth:`ending_of` how each of the others ends then. A task that fails is judged by
    the restart policy as ever: only a training task's exit 0 can end the training."""

    #: No ``chief`` job (TF1 between-graph, worker 0 is the chief): every worker trains until
    #: it is done and exits by itself; once all have exited 0 the ps end as the program says.
    WORKERS = "workers"
    #: A ``chief`` job (TF2 ``ParameterServerStrategy``: the chief is the coordinator, the
    #: workers and ps are servers that never return from ``join()``): the chief's exit 0 ends
    #: the run, and every worker, evaluator and ps still running is stopped at once.
    CHIEF = "chief"

    @classmethod
    def of(cls, jobs: Iterable[Job]) -> RunEnd:
        """The rule for a cluster with tasks of ``jobs``."""
        return cls.CHIEF if Job.CHIEF in set(jobs) else cls.WORKERS

    def trains(self, job: Job) -> bool:
        """Whether a task of ``job`` trains (the run's training is over once every such task
        has exited), rather than serves the ones that do."""
        return job is (Job.CHIEF if self is RunEnd.CHIEF else Job.WORKER)

    def ending_of(self, job: Job, ps_ending: PsEnding) -> PsEnding:
        """How a serving task of ``job`` ends once training is over, in a program whose ps end
        as ``ps_ending`` says: a TF1 ps so; an evaluator is stopped (SIGTERM, then SIGKILL
        after the grace period) at once, and so is everything serving a chief unless the shim
        can make its ``server.join()`` return (``end``: it then exits 0 by itself)."""
        if job is Job.EVALUATOR:
            return PsEnding.STOP
        if self is RunEnd.WORKERS:
            return ps_ending if job is Job.PS else PsEnding.STOP
        return PsEnding.END_LINE if ps_ending is PsEnding.END_LINE else PsEnding.STOP

    def ended_reason(self, chief: str) -> str:
        """Why a serving task that the controller ended counts as succeeded (``chief``: the
        chief's task name)."""
        if self is RunEnd.CHIEF:
            return f"ended by the controller: {chief} finished (counted as succeeded)"
        return "ended by the controller after every worker finished (counted as succeeded)"

    def called_off_reason(self, chief: str, before: str) -> str:
        """Why a serving task waiting to restart (it had ended for ``before``) is not restarted:
        training is over."""
        who = f"{chief} finished" if self is RunEnd.CHIEF else "every worker finished"
        return f"restart called off: {who} while it waited to restart (it {before})"

    def ended_notice(self, chief: str, ended: Sequence[tuple[str, Job]]) -> str | None:
        """What the controller says once it ended the tasks ``ended`` (name and job) because
        training is over: with a chief job, that the chief finished and which it ended
        (workers first, ps last); otherwise nothing (each ps's reason says it)."""
        if self is not RunEnd.CHIEF or not ended:
            return None
        order = (Job.WORKER, Job.EVALUATOR, Job.PS)
        names = [name for name, _ in sorted(ended, key=lambda each: order.index(each[1]))]
        return f"{chief} finished: ended {', '.join(names)} (counted as succeeded)"


@dataclass
class HangWatch:
    """Which workers have stopped making progress after the run reached its target.

    ``target`` is the step the run trains to (0: unknown: a program that ignores ``{steps}``
    may rightly train past it, so then nobody is judged hung until the chief has finished,
    :meth:`chief_done`: a non-chief still waiting for a session the chief no longer serves
    must not hold the run)."""

    target: int
    #: Quiet seconds after which a worker is a candidate; the supervisor then samples its CPU.
    after: float = HANG_AFTER - CPU_SAMPLE
    #: A worker whose last step came this long before the target was reached had stopped
    #: training before it (:meth:`stale`): its silence after the target proves nothing.
    stale_after: float = 15.0
    _advanced: dict[str, tuple[int, float]] = field(default_factory=dict)  # task -> (step, when)
    _stepped: set[str] = field(default_factory=set)  # tasks that reported a step in this run
    _reached_at: float | None = None
    _working: set[str] = field(default_factory=set)  # found busy past the target (said once)
    _chief: str | None = None  # the chief's name once it finished, when that came first

    def started(self, task: str, now: float) -> None:
        """``task`` (a worker or the chief) was launched."""
        self._advanced[task] = (-1, now)

    def step(self, task: str, global_step: int, target: int, now: float) -> None:
        """``task`` reported ``global_step`` (``target`` as it knows it, 0 if not)."""
        if target > 0:
            self.target = target
        last = self._advanced.get(task)
        if last is None or global_step > last[0]:
            self._advanced[task] = (global_step, now)
        if global_step >= 0:
            self._stepped.add(task)
        if self.target > 0 and global_step >= self.target and self._reached_at is None:
            self._reached_at = now

    def exited(self, task: str) -> None:
        self._advanced.pop(task, None)

    def chief_done(self, chief: str, now: float) -> None:
        """The chief exited 0: its training is over, whatever the target, so the others are
        judged from now on as if it had been reached."""
        self._advanced.pop(chief, None)
        if self._reached_at is None:
            self._reached_at, self._chief = now, chief

    @property
    def why(self) -> str:
        """What made the watch start judging, for the reason of a task it ends."""
        if self._chief is not None:
            return f"{self._chief} finished"
        return f"the target step {self.target} was reached"

    def working(self, task: str, now: float) -> bool:
        """``task`` did not move but its process is busy (saving, exporting, evaluating after
        its last step): look again :attr:`after` seconds from ``now``. True the first time,
        so that it is said once."""
        last = self._advanced.get(task)
        if last is not None:
            self._advanced[task] = (last[0], now)
        first = task not in self._working
        self._working.add(task)
        return first

    def paused(self, seconds: float) -> None:
        """The controller did not run for ``seconds`` (tui.core.supervisor.pause): nobody's
        quiet time grows by them."""
        self._advanced = {task: (step, when + seconds) for task, (step, when) in self._advanced.items()}
        if self._reached_at is not None:
            self._reached_at += seconds

    def stale(self, task: str) -> bool:
        """Whether ``task`` last stepped, or was launched and never stepped while a peer did,
        :attr:`stale_after` seconds or more before the target was reached: it was hung, not
        done, and must not be counted as succeeded by the after-target rule. (A worker
        restarted after a ps host's cut that never stepped again was ended past the target
        and counted as succeeded. Where no task reports steps, a program without the shim,
        never stepping says nothing.)"""
        last = self._advanced.get(task)
        if last is None or self._reached_at is None or self._reached_at - last[1] < self.stale_after:
            return False
        return last[0] >= 0 or bool(self._stepped - {task})

    def quiet_for(self, task: str, now: float) -> float:
        """Seconds since ``task`` last advanced (0 if unknown)."""
        last = self._advanced.get(task)
        return 0.0 if last is None else now - last[1]

    @property
    def reached(self) -> bool:
        return self._reached_at is not None

    def hung(self, now: float) -> list[str]:
        """Workers still running whose step has not moved for :attr:`after` seconds since
        the target was reached (or since they last advanced, if later)."""
        if self._reached_at is None:
            return []
        reached = self._reached_at
        return [task for task, (_, when) in self._advanced.items() if now - max(when, reached) >= self.after]

    def next_check(self, now: float) -> float | None:
        """Seconds until someone may be hung (None: nobody can be yet)."""
        if self._reached_at is None or not self._advanced:
            return None
        reached = self._reached_at
        return max(0.0, min(max(when, reached) + self.after for _, when in self._advanced.values()) - now)


async def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on ``host:port`` now."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
