"""A scripted stand-in for the controller core, for tests of what the app shows: it replays
a fixed history of controller events (and those a test feeds it) and records what the app
asked for."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

from textual.pilot import Pilot

from tests.support import with_progress
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.app import TfdistApp
from tui.config.cluster import Job
from tui.core import hints
from tui.core.commands import Command
from tui.core.events import (
    ControllerEvent,
    RunStarted,
    TaskHint,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.inbox import Happening
from tui.core.options import RunOptions
from tui.core.task_state import TaskState
from tui.launch.lines import Stream
from tui.plan.tasks import TaskInfo

T0 = 1_800_000_000.0  # a fixed wall clock: snapshots must not depend on today


class ScriptedCore:
    def __init__(self, events: Sequence[Happening]) -> None:
        self.pending = list(events)
        self.commands: list[Command] = []

    def send(self, command: Command) -> Future[None]:
        self.commands.append(command)
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def drain(self) -> tuple[list[Happening], int]:
        events, self.pending = self.pending, []
        return events, 0

    def close(self, timeout: float) -> None:
        pass


def scripted(options: RunOptions, events: list[ControllerEvent]) -> tuple[TfdistApp, ScriptedCore]:
    """The app over a :class:`ScriptedCore` holding ``events``, at a fixed clock."""
    core = ScriptedCore(events)
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    return app, core


async def feed(app: TfdistApp, core: ScriptedCore, pilot: Pilot[None],
               events: Sequence[ControllerEvent]) -> None:
    """Hand the app more events and let it fold and draw them (as its timer would)."""
    core.pending.extend(events)
    app.refresh_dashboard(force=True)
    await pilot.pause()


def lines(task: str, start: int, count: int, t: float,
          text: str = "{task} line {n}") -> list[ControllerEvent]:
    """``count`` lines of ``task``'s output, numbered from ``start``."""
    return [TaskOutput(task=task, stream=Stream.STDOUT, lines=(text.format(task=task, n=n),), t=t)
            for n in range(start, start + count)]


TASKS = (TaskInfo("ps0", Job.PS, 0, "localhost", 40001, "1 core", "1c"),
         TaskInfo("ps1", Job.PS, 1, "localhost", 40002, "1 core", "1c"),
         TaskInfo("worker0", Job.WORKER, 0, "localhost", 40003, "2 cores (4 threads), GPU 0", "2c/4t g0"),
         TaskInfo("worker1", Job.WORKER, 1, "localhost", 40004, "2 cores (4 threads), GPU 1", "2c/4t g1"))


def placement(num_ps: int = 2, partitions: int = 1, strategy: str = "round_robin") -> protocol.Placement:
    """seed 000's CNN as TensorFlow's round-robin places it: fc1 all on one ps."""
    shapes = [("conv1/weights", (5, 5, 1, 32)), ("conv1/biases", (32,)), ("conv2/weights", (5, 5, 32, 64)),
              ("conv2/biases", (64,)), ("fc1/weights", (3136, 1024)), ("fc1/biases", (1024,)),
              ("fc2/weights", (1024, 10)), ("fc2/biases", (10,))]
    variables, totals = [], [0] * num_ps
    slot = 0
    for name, shape in shapes:
        shards = partitions if shape[0] >= partitions else 1
        for s in range(shards):
            part = (shape[0] // shards, *shape[1:])
            size = 4
            for d in part:
                size *= d
            ps = slot % num_ps if strategy == "round_robin" else totals.index(min(totals))
            slot += 1
            totals[ps] += size
            variables.append(protocol.VariableShard(name=f"{name}/part_{s}" if shards > 1 else name,
                                                    variable=name, shard=s, num_shards=shards,
                                                    shape=part, dtype="float32", bytes=size, ps=ps))
    return protocol.Placement(role="worker", index=0, t=T0, model="cnn", strategy=strategy,
                              partitions=partitions, num_ps=num_ps, variables=tuple(variables),
                              ps_bytes=tuple(totals))


def running_history(settings: TrainingSettings) -> list[ControllerEvent]:
    """A 2 ps + 2 worker run, 40 s in, at step 1,200 of 3,000."""
    events: list[ControllerEvent] = [RunStarted(run_id="20270115-093000-abc123", run_dir=Path("runs/x"),
                                                tasks=TASKS, settings=settings, t=T0)]
    for i, info in enumerate(TASKS):
        events.append(TaskStateChanged(task=info.name, old=TaskState.PENDING, new=TaskState.STARTING,
                                       pid=1000 + i, t=T0 + 1))
        events.append(TaskStateChanged(task=info.name, old=TaskState.STARTING, new=TaskState.RUNNING,
                                       pid=1000 + i, t=T0 + 4))
        events.append(TaskOutput(task=info.name, stream=Stream.STDOUT, lines=(f"{info.name} listening",),
                                 t=T0 + 4))
    events.append(TrainerEvent(task="worker0", event=placement(), t=T0 + 5))
    for step in range(1, 31):
        for w, rate in (("worker0", 5000.0 + 40 * step), ("worker1", 4800.0 + 25 * step)):
            index = int(w[-1])
            events.append(TrainerEvent(task=w, t=T0 + 5 + step, event=protocol.Step(
                role="worker", index=index, t=T0 + 5 + step, global_step=40 * step,
                local_step=20 * step, loss=2.3 / (1 + step / 5), examples_per_sec=rate,
                step_time=0.012, target=3000)))
            events.append(TaskOutput(task=w, stream=Stream.STDOUT, lines=(f"{w} step {40 * step}",),
                                     t=T0 + 5 + step))
    for index, shares in ((0, (0.3, 0.05, 0.2, 0.15, 0.1, 0.1, 0.1)),
                          (1, (0.25, 0.05, 0.25, 0.1, 0.1, 0.15, 0.1))):
        names = (("compute", None), ("input", None), ("read", 0), ("read", 1), ("push", 0), ("push", 1),
                 ("rest", None))
        parts = tuple(protocol.AnatomyPart(part=part, ps=ps, seconds=0.012 * share, share=share)
                      for (part, ps), share in zip(names, shares, strict=True))
        events.append(TrainerEvent(task=f"worker{index}", t=T0 + 35, event=protocol.StepAnatomy(
            role="worker", index=index, t=T0 + 35, global_step=1180 + index, local_step=590,
            seconds=0.012, parts=parts, every=120, cost=0.004)))
    return with_progress(events)


def failed_history(settings: TrainingSettings) -> list[ControllerEvent]:
    events = running_history(settings)
    events.append(TaskOutput(task="worker1", stream=Stream.STDERR,
                             lines=("trainer: worker1: UnavailableError: Socket closed",), t=T0 + 36))
    events.append(TaskHint(task="worker1", hint=hints.UNAVAILABLE, t=T0 + 36))
    events.append(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.FAILED, pid=1003,
                                   exit_code=1, reason="exited with code 1", t=T0 + 36))
    return with_progress(events)
