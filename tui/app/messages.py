"""Messages the app posts to itself: every operator request goes through one, so tests (and
a future keymap) see exactly what was asked, and handlers are the only place that acts."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from textual.message import Message

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.core.commands import Command


class TaskAction(Enum):
    START = "start"
    STOP = "stop"
    RESTART = "restart"


@dataclass
class TaskActionRequested(Message):
    """Start, stop or restart one task."""

    action: TaskAction
    task: str


@dataclass
class AllTasksRequested(Message):
    """Start (``start=True``) or stop every task."""

    start: bool


@dataclass
class PendingSettingsChanged(Message):
    """Settings changed in the app but not applied to the cluster yet."""

    pending: TrainingSettings


@dataclass
class RelaunchRequested(Message):
    """Relaunch the whole cluster with these settings (already confirmed)."""

    settings: TrainingSettings


@dataclass
class PreviewReady(Message):
    """The placement of pending settings is known (tui/plan/preview.py)."""

    settings: TrainingSettings
    placement: protocol.Placement


@dataclass
class PreviewFailed(Message):
    settings: TrainingSettings
    reason: str


@dataclass
class CoreActionFailed(Message):
    """A command sent to the core raised."""

    command: Command
    reason: str

    @property
    def what(self) -> str:
        return self.command.describe()
