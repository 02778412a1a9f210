"""The task-program interface: what a task runs and how the controller deals with it.

A :class:`TaskProgram` answers, for the supervisor and the plan, every question that used to
assume the built-in trainer: the command line, environment and working folder of each task
(:meth:`TaskProgram.command`), whether tasks are launched held and released with ``go``
(:attr:`TaskProgram.holds`), how readiness is known (:attr:`TaskProgram.readiness`), how a ps
ends (:attr:`TaskProgram.ps_ending`), what output lines mean (:meth:`TaskProgram.reader`), and
which training settings it honours (:meth:`TaskProgram.honours`). The contract with the task
process itself (``--hold``, ``go``, ``end``, EOF, exit codes) is documented once, in
:mod:`trainer.protocol`. Implementations: :mod:`tui.program.trainer` (the built-in trainer)
and :mod:`tui.program.user` (the user's own program, ``program:`` in hosts.yaml).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig, HostSpec, Job, TaskSpec
from tui.program.hostkind import Kind


class Readiness(Enum):
    """How the controller learns that a task's server is up."""

    EVENT = "event"      # the task emits a protocol ``ready`` event
    SERVER = "server"    # ``ready`` if it comes, else TF's "Started server" line or the port accepting


class PsEnding(Enum):
    """How a ps task ends once training is over (:class:`~tui.program.end_rules.RunEnd`)."""

    EXITS = "exits"      # it exits 0 by itself (the trainer's handshake with the workers)
    END_LINE = "end"     # the controller sends protocol.END_LINE, it exits 0 (the shim)
    STOP = "stop"        # the controller stops it and counts it as succeeded


class Setting(Enum):
    """Training settings the app's toggles change; a program may or may not honour each."""

    MODE = "mode"
    PARTITIONS = "partitions"
    PLACEMENT = "placement"
    FUSE = "fuse"


@dataclass(frozen=True)
class TaskContext:
    """Everything a program needs to render one task's command."""

    config: ClusterConfig
    spec: TaskSpec
    host: HostSpec
    #: Resolved ports of every task, by name.
    ports: Mapping[str, int]
    settings: TrainingSettings
    run_id: str
    #: The run directory on this machine (None: not recorded, e.g. a preview or a benchmark).
    run_dir: Path | None
    #: The interpreter ``python`` means on this task's host.
    python: str
    #: What the host's kind means for paths (local ones, or the host's).
    kind: Kind
    #: Every job's ``host:port`` addresses by the job's name (as :meth:`address` gives each),
    #: made once for a run's tasks; None: made here when asked.
    addresses: Mapping[str, Sequence[str]] | None = None

    @property
    def run_dir_name(self) -> Path:
        """The run directory on this machine (``run_dir`` in the config's when not recorded)."""
        return self.run_dir if self.run_dir is not None else self.config.run_dir / self.run_id

    def address(self, task: TaskSpec) -> str:
        """``host:port`` of ``task`` as the other tasks reach it."""
        return self.config.address_of(task, self.ports[task.name])

    def job_addresses(self, job: Job) -> str:
        """The addresses of ``job``'s tasks, comma-separated (``{ps_hosts}``)."""
        if self.addresses is not None:
            return ",".join(self.addresses.get(job.value, ()))
        return ",".join(self.address(t) for t in self.config.of_job(job))


@dataclass(frozen=True)
class TaskCommand:
    """What the launcher runs for one task. ``env`` is added to the host's environment;
    ``cwd`` None inherits the launcher's."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    #: Folders (relative to the trainer's root, ``/``-separated) to put on PYTHONPATH after
    #: the trainer's, where the plan sets it (the host's kind says whether it does).
    python_path: tuple[str, ...] = ()


class OutputReader(ABC):
    """Turns one task's output lines into protocol events (and keeps any state that needs,
    such as the previous step for a rate). One reader per task process.

    Output arrives in batches (the lines one read completed): :meth:`read_batch` and
    :meth:`noise_in` take a batch at once, so that the plain lines of a flood are passed
    over by a few substring searches of the whole batch, not a call per line."""

    #: Text every line that means something to :meth:`read` holds (any one of them); a
    #: batch with none of them is passed over whole. Empty: every line is read.
    clues: tuple[str, ...] = ()

    @abstractmethod
    def read(self, line: str, now: float) -> list[protocol.Event]:
        """The events ``line`` means (none for plain log text). ``now`` is the time it was read."""

    def read_batch(self, lines: Sequence[str], joined: str, now: float,
                   skip: Container[int] = ()) -> dict[int, list[protocol.Event]]:
        """The events of each line of a batch that means any, by the line's index, read in
        order. ``joined``: the lines joined by newlines; ``skip``: indices never read (pieces
        of an over-long line)."""
        clues = self.clues
        if clues and not any(clue in joined for clue in clues):
            return {}
        if len(lines) == 1:  # (most batches of a task printing a line at a time: no second search)
            events = self.read(lines[0], now) if 0 not in skip else []
            return {0: events} if events else {}
        found: dict[int, list[protocol.Event]] = {}
        for index, line in enumerate(lines):
            if index in skip or (clues and not any(clue in line for clue in clues)):
                continue
            if events := self.read(line, now):
                found[index] = events
        return found

    def noise_in(self, lines: Sequence[str], joined: str, skip: Container[int] = ()) -> frozenset[int]:
        """Indices of the lines of a batch left out of the live view (the task's log keeps
        them); ``joined`` and ``skip`` as for :meth:`read_batch`."""
        return frozenset()


class EventReader(OutputReader):
    """Only protocol event lines mean anything (the built-in trainer)."""

    clues = ("{",)

    def read(self, line: str, now: float) -> list[protocol.Event]:
        event = protocol.parse_event(line)
        return [event] if event is not None else []


class TaskProgram(ABC):
    """What every task of a run executes; see the module docstring."""

    #: Tasks are launched with ``--hold`` and wait for ``go`` before starting their servers.
    holds: bool = False
    #: The warm pool its tasks start from (a :data:`trainer.warm.MODES` key), or None: known
    #: before anything is planned, so each host can start its pool while it is checked.
    warm_mode: str | None = None
    #: Its hosts must have TensorFlow (their version is looked up while they are prepared);
    #: False for a program that may not use it at all.
    checks_tensorflow: bool = True
    readiness: Readiness = Readiness.EVENT
    ps_ending: PsEnding = PsEnding.EXITS
    #: Its output on stderr means something too (TensorFlow's own log lines).
    reads_stderr: bool = False
    #: Its placement can be computed without running it (trainer/layout.py).
    previews_placement: bool = False
    #: Once its chief exited 0, a worker that no longer makes progress is ended (a user's
    #: non-chief may wait forever for a session the chief no longer serves); the built-in
    #: trainer's workers end by themselves.
    ends_left_behind: bool = False
    #: Its chief is a TF2 ParameterServerStrategy coordinator, which reschedules a lost
    #: worker's functions on the others: a worker's failure need not end the run.
    coordinates_workers: bool = False

    def target(self, settings: TrainingSettings) -> int:
        """The step the program trains to, when the controller knows it and the program may
        hang after reaching it (then a worker stuck there is ended); 0 otherwise."""
        return 0

    def progress_target(self, settings: TrainingSettings) -> int:
        """The step the progress counts to (``steps N / target``); 0 when the program never
        said (its own default, not ours)."""
        return settings.steps

    def describe(self, settings: TrainingSettings) -> str:
        """What the run does, in one line for the run's header."""
        s = settings
        return (f"training {s.model.value} on {s.dataset.value}, {s.mode.value}, {s.steps} steps, "
                f"{s.partitions} partition(s), {s.placement.value}")

    @property
    @abstractmethod
    def name(self) -> str:
        """What the run runs, in a few words (for summaries and the run directory)."""

    @abstractmethod
    def command(self, ctx: TaskContext) -> TaskCommand:
        """The command line, environment and working folder of ``ctx.spec``."""

    @abstractmethod
    def reader(self, spec: TaskSpec, settings: TrainingSettings | None = None) -> OutputReader:
        """A fresh reader for one process of task ``spec`` in a run with ``settings``."""

    @abstractmethod
    def honours(self, setting: Setting) -> bool:
        """Whether changing ``setting`` changes what the program does."""

    def ignores(self, setting: Setting) -> str | None:
        """Why changing ``setting`` would change nothing (for the key or flag that changes
        it to say so instead of pretending), or None when the program honours it."""
        return None
