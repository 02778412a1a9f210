"""A soak of faults on the lab (tests/launch/netfaults.py's standard layout: ps0 on h0, worker0
on h1, worker1 on h2), shared by the suite's short soak (tests/launch/test_soak_faults.py) and the
longer benchmark (bench/hosts/soak.py): a seeded schedule of faults of every kind, each
injected once every worker steps again after the one before, and what an operator is
promised, read back from the run's events: checkpoints only increase, no restore goes below
the last checkpoint, every incident is explained by a fault, every worker steps again soon
after each fault's end."""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from tests.launch.netfaults import Controller
from tests.support import wait_until
from tests.support.netlab import NetLab

WORKERS = ("worker0", "worker1")
#: Each task's host in the standard layout.
HOST_OF = {"ps0": "h0", "worker0": "h1", "worker1": "h2"}
#: Every worker steps again within this long after a fault's end (the issue's floor on 2 cores).
RECOVERY_BOUND = 60.0
#: An incident counts as a fault's when it comes between the fault's start and this long
#: after its end (a worker's links time out up to gRPC's 20 s after a cut's end).
EXPLAINED_AFTER = 90.0
#: The soak's ``network:`` settings: a lease a cut of 8-15 s outlasts now and then, and hosts
#: given two minutes to answer again before their tasks count as lost.
NETWORK: dict[str, float] = {"lease": 30.0, "unreachable_timeout": 120.0}
#: Steps per fault of the run's target: with the ps's link paced (at most ~26 steps/s,
#: tests/launch/netfaults.PACE) the run cannot make them during a fault and its recovery; once
#: the pace is lifted after the last fault it ends at full speed.
STEPS_PER_FAULT = 2000


class FaultKind(Enum):
    """What a fault does: SIGKILL a worker or the ps, SIGSTOP a worker for a while, cut a
    worker's host off for a while."""

    KILL_WORKER = "SIGKILL worker"
    KILL_PS = "SIGKILL ps"
    STOP_WORKER = "SIGSTOP worker"
    CUT_HOST = "cut worker host"


@dataclass(frozen=True)
class Fault:
    """One fault of a schedule: its kind, the task it hits, and how long it lasts (0: at once)."""

    kind: FaultKind
    task: str
    seconds: float = 0.0

    def __str__(self) -> str:
        lasting = f" {self.seconds:.0f} s" if self.seconds else ""
        where = f"{HOST_OF[self.task]} ({self.task})" if self.kind is FaultKind.CUT_HOST else self.task
        return f"{self.kind.value} {where}{lasting}"


@dataclass
class Injected:
    """A fault as it happened: when it began and ended (wall clock, as the run's events)."""

    fault: Fault
    began: float
    ended: float
    #: Each worker's seconds from the fault's end to its first step after it (None: none).
    recovered: dict[str, float | None] = field(default_factory=dict)


def schedule(seed: int, count: int, kinds: Sequence[FaultKind] = tuple(FaultKind),
             seconds: float | None = None) -> list[Fault]:
    """``count`` faults of ``kinds`` from ``seed``: every kind once before any twice, in a
    random order, on random workers, SIGSTOPs of 15-25 s and cuts of 8-15 s (or each
    ``seconds`` long)."""
    rng = random.Random(seed)
    chosen: list[FaultKind] = []
    while len(chosen) < count:
        batch = list(kinds)
        rng.shuffle(batch)
        chosen += batch
    faults = []
    for kind in chosen[:count]:
        task = "ps0" if kind is FaultKind.KILL_PS else rng.choice(WORKERS)
        lasting = {FaultKind.STOP_WORKER: rng.uniform(15, 25),
                   FaultKind.CUT_HOST: rng.uniform(8, 15)}.get(kind, 0.0)
        if seconds is not None and lasting:
            lasting = seconds
        faults.append(Fault(kind, task, round(lasting)))
    return faults


def task_pid(controller: Controller, task: str) -> int:
    """The pid of ``task``'s latest launch, as its start line said."""
    pids = re.findall(rf"^{task} +\| -- starting \(pid (\d+)", controller.text(), re.M)
    assert pids, controller.text()[-3000:]
    return int(pids[-1])


def inject(lab: NetLab, controller: Controller, fault: Fault) -> Injected:
    """Do ``fault`` (a kill at once; a stop or a cut for its seconds, then undone)."""
    began = time.time()
    if fault.kind in (FaultKind.KILL_WORKER, FaultKind.KILL_PS):
        os.kill(task_pid(controller, fault.task), signal.SIGKILL)
    elif fault.kind is FaultKind.STOP_WORKER:
        pid = task_pid(controller, fault.task)
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(fault.seconds)  # the fault itself, not a wait
        finally:
            os.kill(pid, signal.SIGCONT)
    else:
        lab.cut(HOST_OF[fault.task])
        try:
            time.sleep(fault.seconds)
        finally:
            lab.restore(HOST_OF[fault.task])
    return Injected(fault, began, time.time())


def all_stepping_after(controller: Controller, after: float) -> bool:
    """Every worker has stepped since ``after`` (wall clock)."""
    return all(controller.steps(worker, after=after) for worker in WORKERS)


def soak(lab: NetLab, controller: Controller, faults: list[Fault]) -> list[Injected]:
    """Inject ``faults`` one at a time, each once every worker steps again after the one
    before (and the run still goes on); then wait for the last one's recovery."""
    done: list[Injected] = []
    for fault in faults:
        _recovered(controller, done[-1].ended if done else 0.0)
        assert controller.process.poll() is None, controller.text()[-3000:]
        done.append(inject(lab, controller, fault))
    _recovered(controller, done[-1].ended if done else 0.0)
    return done


def _recovered(controller: Controller, after: float) -> None:
    """Wait until every worker steps since ``after`` (or the run ended)."""
    wait_until(lambda: all_stepping_after(controller, after) or controller.process.poll() is not None,
               RECOVERY_BOUND + 120, lambda: controller.text()[-3000:])


def recoveries(controller: Controller, done: list[Injected]) -> None:
    """Fill in each fault's :attr:`Injected.recovered` from the run's step events."""
    for injected in done:
        for worker in WORKERS:
            steps = controller.steps(worker, after=injected.ended)
            injected.recovered[worker] = steps[0][0] - injected.ended if steps else None


def checkpoints(controller: Controller) -> list[tuple[str, int]]:
    """(action, global step) of the chief's checkpoint events, in order."""
    return [(e["event"]["action"], e["event"]["global_step"]) for e in controller.events()
            if e["type"] == "trainer_event" and e["event"]["event"] == "checkpoint"]


def checkpoint_faults(saved_and_restored: list[tuple[str, int]]) -> list[str]:
    """What breaks the promise: a saved checkpoint not above the one before, a restore below
    the last one saved."""
    wrong, last = [], -1
    for action, step in saved_and_restored:
        if action == "saved":
            if step <= last:
                wrong.append(f"saved at {step} after {last}")
            last = max(last, step)
        elif action == "restored" and step < last:
            wrong.append(f"restored at {step} below the last checkpoint {last}")
    return wrong


def unexplained(incidents: list[dict[str, object]], done: list[Injected]) -> list[dict[str, object]]:
    """Incidents no fault explains: none on the fault's task between its start and
    :data:`EXPLAINED_AFTER` after its end."""
    def explained(incident: dict[str, object]) -> bool:
        t = float(incident["t"])  # type: ignore[arg-type]
        return any(incident["task"] == i.fault.task and i.began <= t <= i.ended + EXPLAINED_AFTER
                   for i in done)
    return [incident for incident in incidents if not explained(incident)]


def context(controller: Controller, incident: dict[str, object], done: list[Injected], lines: int = 3) -> str:
    """Where an incident came among the faults and what its task last said before it, for a
    promise broken by it: a fault's collateral not yet counted as such, or a failure of ours."""
    t = float(incident["t"])  # type: ignore[arg-type]
    before = [i for i in done if i.began <= t]
    when = (f"{t - before[-1].ended:.0f} s after the end of '{before[-1].fault}'" if before
            else "before the first fault")
    # The task's log in the run directory: "HH:MM:SS.mmm out | line", local time.
    clock = time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"
    said = [line.partition(" | ")[2] for path in controller.runs.glob(f"*/logs/{incident['task']}.log")
            for line in path.read_text(errors="replace").splitlines()
            if line[:12] <= clock and not line.partition(" | ")[2].startswith("{")]
    return f"at step {incident['global_step']}, {when}; it last said: {' | '.join(said[-lines:])[-600:]}"


def slow_link_hints(controller: Controller) -> list[str]:
    """The slow-link hints of the run (tui.core.slow_link): none of the soak's faults slows a
    link (the ps's pace holds from before the first step to after the last fault)."""
    return [str(e["hint"]) for e in controller.events()
            if e["type"] == "task_hint" and "'s link carried " in str(e["hint"])]


def detected_as(controller: Controller, injected: Injected) -> str:
    """What the controller first said of the fault's task after it began: its notice."""
    task = injected.fault.task
    for e in controller.events():
        if e["type"] == "notice" and e.get("t", 0) >= injected.began and (
                e.get("task") == task or HOST_OF[task] in str(e.get("text", ""))):
            return str(e["text"])[:70]
    return "nothing (no notice)"


def table(controller: Controller, done: list[Injected], incidents: list[dict[str, object]]) -> list[str]:
    """One line per fault: the fault, what it was detected as, the time to recovery (the
    slowest worker's first step after the fault's end), the collateral (incidents of other
    tasks in its time)."""
    lines = [f"{'fault':34} {'detected as':72} {'recovery':>9}  collateral"]
    for injected in done:
        slowest = [s for s in injected.recovered.values() if s is not None]
        recovery = f"{max(slowest):.1f} s" if len(slowest) == len(WORKERS) else "never"
        others = sorted({str(i["task"]) for i in incidents if _collateral(i, injected, done)})
        lines.append(f"{injected.fault!s:34} {detected_as(controller, injected):72} {recovery:>9}  "
                     f"{', '.join(others) or 'none'}")
    return lines


def _collateral(incident: dict[str, object], injected: Injected, done: list[Injected]) -> bool:
    """An incident in ``injected``'s time, of another task, that no later fault explains."""
    t = float(incident["t"])  # type: ignore[arg-type]
    if incident["task"] == injected.fault.task or not injected.began <= t <= injected.ended + EXPLAINED_AFTER:
        return False
    return not any(incident["task"] == later.fault.task and later.began <= t for later in done
                   if later.began > injected.began)
