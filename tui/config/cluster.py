"""What a validated hosts.yaml says: hosts, tasks, restart policies and training settings, as
frozen dataclasses. :mod:`tui.config.load` reads a file into these (and re-exports them)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from trainer.settings import TrainingSettings
from tui.config.network import NetworkSettings
from tui.config.program_spec import ProgramSpec
from tui.config.resources import ResourceSettings
from tui.config.slurm import SlurmSettings

LOCALHOST = "localhost"
#: The names of this machine's loopback interface, as hosts.yaml may write them.
LOOPBACK = frozenset({LOCALHOST, "127.0.0.1", "::1"})


def machine_of(address: str) -> str:
    """One name per machine: every loopback name is ``localhost``; other addresses as written
    (lower-cased), so an entry and its address, or ``localhost`` and ``127.0.0.1``, match."""
    address = address.lower()
    return LOCALHOST if address in LOOPBACK else address
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
    SLURM = "slurm"


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
    #: A ``kind: slurm`` entry's allocation (and, once placed, the task's job id and node).
    slurm: SlurmSettings | None = None

    @property
    def label(self) -> str:
        """The name shown for a task's host: the entry's name, and for a task placed in a
        Slurm allocation its node and job id too (``hpc/node3 job 812``)."""
        if self.slurm is not None and self.slurm.node is not None:
            return f"{self.name}/{self.slurm.node} job {self.slurm.job_id}"
        return self.name
    #: ``warm: false`` starts every task cold (no fork server: tui.launch.local.warm).
    warm: bool = True

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
        tasks default to the controller's own interpreter: :func:`tui.plan.tasks.plan_run`)."""
        return self.python or DEFAULT_PYTHON


@dataclass(frozen=True)
class TaskSpec:
    """One ps or worker task. ``port`` is None for ``auto`` (chosen free at launch)."""

    job: Job
    index: int
    host: str
    port: int | None
    gpus: int | None = None
    #: For a task of a ``kind: slurm`` host: the node of the allocation it must run on.
    node: str | None = None

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
    """Whether and how often a failed task is started again: at most ``max_restarts`` within
    any ``window`` seconds (0: within the whole run), each after ``backoff`` seconds."""

    policy: RestartMode = RestartMode.NEVER
    max_restarts: int = 3
    backoff: float = 1.0
    window: float = 600.0


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
    #: How each host's cores and GPUs are shared among its tasks (tui.plan.allocation).
    resources: ResourceSettings = field(default_factory=ResourceSettings)
    #: What happens when a remote host stops answering (tui.config.network).
    network: NetworkSettings = field(default_factory=NetworkSettings)

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
        return self.hosts.get(task.host) or _bare_host(task.host)

    def address_of(self, task: TaskSpec, port: int, placed: HostSpec | None = None) -> str:
        """``address:port`` of ``task`` as the other tasks reach it (its TF_CONFIG entry);
        ``placed``: the host its launcher put it on, where that is not its entry's (Slurm)."""
        return f"{(placed or self.host_of(task)).address}:{port}"

    def restart_policy(self, job: Job) -> RestartPolicy:
        """The restart policy for ``job``'s tasks: its override, else the cluster-wide one;
        an evaluator's default is to be restarted (``on-failure``, the cluster-wide counts):
        it only watches training, and training never waits for it."""
        if job in self.restart_overrides:
            return self.restart_overrides[job]
        if job is Job.EVALUATOR:
            return dataclasses.replace(self.restart, policy=RestartMode.ON_FAILURE)
        return self.restart


@functools.lru_cache(maxsize=1024)
def _bare_host(name: str) -> HostSpec:
    """The host a task names without a ``hosts:`` entry: made once per name (a run's plan
    asks for every task's host once per task, 65,536 times with 256 tasks)."""
    return HostSpec(name=name, address=name)
