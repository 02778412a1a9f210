"""What a validated hosts.yaml says: hosts, tasks, restart policies and training settings, as
frozen dataclasses. :mod:`tui.config` reads a file into these (and re-exports them)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from trainer.settings import TrainingSettings
from tui.program.spec import ProgramSpec
from tui.resource_settings import ResourceSettings

LOCALHOST = "localhost"
DEFAULT_PYTHON = "python3"


class Job(str, Enum):
    """A task's job in the cluster. ``chief`` and ``evaluator`` follow TensorFlow 2's
    TF_CONFIG conventions and are accepted only for a user's ``program:``."""

    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


class HostKind(str, Enum):
    """How a host's tasks are launched (:mod:`tui.launch.kinds` maps each to a launcher)."""

    LOCAL = "local"
    SSH = "ssh"


@dataclass(frozen=True)
class HostSpec:
    """How to reach one machine. ``localhost`` needs no entry and is never reached over SSH."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    jump: str | None = None
    python: str | None = None  # as hosts.yaml names it, if it does; see interpreter
    workdir: str = "~/tfdist"
    env: Mapping[str, str] = field(default_factory=dict)
    #: ``kind:`` as written; None infers it: ``localhost`` is local, every other host SSH.
    kind: HostKind | None = None

    @property
    def launch_kind(self) -> HostKind:
        """The kind of launcher that starts this host's tasks."""
        if self.kind is not None:
            return self.kind
        return HostKind.LOCAL if self.name == LOCALHOST else HostKind.SSH

    @property
    def is_local(self) -> bool:
        """Tasks run on this machine (no connection to make, paths are local ones)."""
        return self.launch_kind is HostKind.LOCAL

    @property
    def interpreter(self) -> str:
        """The Python to run on a remote host: ``python:``, else ``python3`` from PATH (local
        tasks default to the controller's own interpreter: :func:`tui.plan.plan_run`)."""
        return self.python or DEFAULT_PYTHON


@dataclass(frozen=True)
class TaskSpec:
    """One ps or worker task. ``port`` is None for ``auto`` (chosen free at launch)."""

    job: Job
    index: int
    host: str
    port: int | None
    gpus: int | None = None

    @functools.cached_property  # asked for on every line of output a task prints
    def name(self) -> str:
        """``ps0``, ``worker1``: the task's name everywhere in the UI and the run directory."""
        return f"{self.job.value}{self.index}"

    @property
    def is_chief(self) -> bool:
        """Worker 0, the chief when the cluster has no ``chief`` job (see
        :attr:`ClusterConfig.chief`, which knows the whole cluster)."""
        return (self.job is Job.WORKER and self.index == 0) or self.job is Job.CHIEF



class RestartMode(str, Enum):
    """What to do when a task exits with an error."""

    NEVER = "never"
    ON_FAILURE = "on-failure"


@dataclass(frozen=True)
class RestartPolicy:
    """Whether and how often a failed task is started again; ``backoff`` is in seconds."""

    policy: RestartMode = RestartMode.NEVER
    max_restarts: int = 3
    backoff: float = 1.0


@dataclass(frozen=True)
class ClusterConfig:
    """A validated hosts.yaml."""

    path: Path
    hosts: Mapping[str, HostSpec]
    tasks: tuple[TaskSpec, ...]
    training: TrainingSettings
    #: Where runs are recorded. :func:`load_config` always makes it absolute (relative paths
    #: are taken from the hosts.yaml's directory); the default only serves hand-built configs.
    run_dir: Path = Path("runs")
    restart: RestartPolicy = RestartPolicy()
    restart_overrides: Mapping[Job, RestartPolicy] = field(default_factory=dict)
    #: The user's own program (``program:``); None runs the built-in trainer.
    program: ProgramSpec | None = None
    #: How each host's cores and GPUs are shared among its tasks (tui.resources).
    resources: ResourceSettings = field(default_factory=ResourceSettings)

    @property
    def ps_tasks(self) -> tuple[TaskSpec, ...]:
        return self.of_job(Job.PS)

    @property
    def worker_tasks(self) -> tuple[TaskSpec, ...]:
        return self.of_job(Job.WORKER)

    def of_job(self, job: Job) -> tuple[TaskSpec, ...]:
        """The tasks of one job, in index order."""
        return tuple(t for t in self.tasks if t.job is job)

    @property
    def chief(self) -> TaskSpec:
        """The task that initialises the model: the ``chief`` task, else worker 0."""
        return next((t for t in self.tasks if t.job is Job.CHIEF), None) or self.worker_tasks[0]

    def host_of(self, task: TaskSpec) -> HostSpec:
        return self.hosts.get(task.host) or HostSpec(name=task.host, address=task.host)

    def restart_policy(self, job: Job) -> RestartPolicy:
        """The restart policy for ``job``'s tasks: its override, else the cluster-wide one."""
        return self.restart_overrides.get(job, self.restart)
