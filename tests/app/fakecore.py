"""The real core (session, supervisor, bridge thread) over a launcher whose tasks are
scripted processes that train by themselves: for Pilot tests about the app, which must not
depend on how fast a loaded machine imports TensorFlow. (tests/ui/test_pilot.py keeps a
test against real processes.)"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.app.scripted import placement
from tests.support.fakes import FakeLauncher, FakeProcess
from trainer import protocol
from tui.app.app import TfdistApp
from tui.app.bridge import CoreBridge
from tui.config.cluster import HostSpec, Job, TaskSpec
from tui.core.options import RunOptions
from tui.core.session import Session
from tui.core.supervisor.lifecycle import Supervisor

#: Seconds between two step reports of a scripted worker.
STEP_EVERY = 0.05


@dataclass
class TrainingLauncher(FakeLauncher):
    """Each task reports ready at once; each worker then reports a step every
    :data:`STEP_EVERY` seconds (the global step shared, as a ps would hold it) until it is
    stopped, and the chief reports the placement of ``num_ps`` ps."""

    num_ps: int = 1
    global_step: int = 0
    _trainers: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> FakeProcess:
        process = await super().start(task, host, argv, env, cwd)
        process.ready()
        if task.job is Job.WORKER:
            trainer = asyncio.get_running_loop().create_task(self._train(process))
            self._trainers.add(trainer)
            trainer.add_done_callback(self._trainers.discard)
        return process

    async def close(self) -> None:
        for trainer in list(self._trainers):
            trainer.cancel()
        await asyncio.gather(*self._trainers, return_exceptions=True)

    async def _train(self, process: FakeProcess) -> None:
        if process.task.index == 0:
            process.emit(placement(num_ps=self.num_ps))
        local = 0
        while not process.exited:
            await asyncio.sleep(STEP_EVERY)
            self.global_step += 1
            local += 1
            process.emit(protocol.Step(role="worker", index=process.task.index,
                                       global_step=self.global_step, local_step=local, loss=1.0 / local,
                                       examples_per_sec=1000.0, step_time=STEP_EVERY, target=0))


def fake_app(options: RunOptions, runs_root: Path, num_ps: int = 1) -> TfdistApp:
    """The app over the real core with a :class:`TrainingLauncher`."""

    def session() -> Session:
        launcher = TrainingLauncher(num_ps=num_ps)
        return Session(Supervisor(options.config, runs_root=runs_root, launcher=launcher,
                                  options=options.supervisor_options()))

    return TfdistApp(options, core_factory=lambda app: CoreBridge(session))
