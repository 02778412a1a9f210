"""What a front end asks the core to do: typed commands, not closures, so a request can be
recorded, compared in tests and described to people. :meth:`tui.core.session.Session.execute`
carries them out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

from trainer.settings import TrainingSettings
from tui.core.events import RunOutcome


@dataclass(frozen=True)
class StartRun:
    """Look for leftover tasks of earlier runs (once a session), then start a run."""

    def describe(self) -> str:
        return "start the cluster"


@dataclass(frozen=True)
class StartTask:
    """Start one task that is not running, regardless of the start order."""

    task: str

    def describe(self) -> str:
        return f"start {self.task}"


@dataclass(frozen=True)
class StopTask:
    """Stop one task (SIGTERM, SIGKILL after the grace period)."""

    task: str

    def describe(self) -> str:
        return f"stop {self.task}"


@dataclass(frozen=True)
class RestartTask:
    """Stop one task and start it again with the same command line."""

    task: str

    def describe(self) -> str:
        return f"restart {self.task}"


@dataclass(frozen=True)
class StopAll:
    """Stop every task; the run ends as ``outcome`` (stopped; interrupted when a signal
    asked) with ``reason``."""

    outcome: RunOutcome = RunOutcome.STOPPED
    reason: str = "stopped on request"

    def describe(self) -> str:
        return "stop all"


@dataclass(frozen=True)
class Relaunch:
    """Stop the current run (if any) and start a new one with ``settings``."""

    settings: TrainingSettings

    def describe(self) -> str:
        return "relaunch"


@dataclass(frozen=True)
class OpenTensorBoard:
    """TensorBoard for ``run_dirs`` (none: the current run's directory), stopped with the
    session; its address comes as a notice."""

    run_dirs: tuple[Path, ...] = ()

    def describe(self) -> str:
        return "open TensorBoard"


Command = Union[StartRun, StartTask, StopTask, RestartTask, StopAll, Relaunch, OpenTensorBoard]
