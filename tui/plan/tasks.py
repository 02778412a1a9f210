"""What exactly each task of a run executes: command line, TF_CONFIG, environment.

Pure functions of the config, the training settings and the resolved ports, so the run
directory can record precisely what was launched and tests can check it without processes.
What the command is comes from the run's :class:`~tui.program.base.TaskProgram` (the
built-in trainer, or the user's ``program:``); what the host's kind means for interpreters
and paths comes from :mod:`tui.launch.kinds`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig, HostSpec, Job, TaskSpec
from tui.launch.owner import CONTROLLER_ENV, RUN_ID_ENV, ControllerId, this_controller
from tui.launch.package import trainer_root
from tui.plan.allocation import GROWTH_ENV, VISIBLE_GPUS_ENV, Allocation, TaskShare
from tui.program.base import TaskContext, TaskProgram
from tui.program.hostkind import kind_of
from tui.program.trainer import TRAINER_ARGV, BuiltinTrainer
from tui.program.user import UserProgram

__all__ = ["CONTROLLER_ONLY_ENV", "GO_LINE", "HOLD_FLAG", "TaskPlan", "plan_run", "program_for", "tf_config"]

#: The task contract's hold flag and release line (documented in :mod:`trainer.protocol`).
HOLD_FLAG = protocol.HOLD_FLAG
GO_LINE = protocol.GO_LINE
#: Variables that only mean something to a task under this controller (whose run, whose task,
#: who holds its port): an export for another launcher leaves them out.
CONTROLLER_ONLY_ENV = frozenset({RUN_ID_ENV, CONTROLLER_ENV, protocol.PORT_HELD_ENV})
#: Jobs TF_CONFIG's cluster lists (TensorFlow leaves the evaluator out of the cluster).
_CLUSTER_JOBS = (Job.CHIEF, Job.PS, Job.WORKER)


@dataclass(frozen=True)
class TaskInfo:
    """A task as launched in this run: its place in the cluster and its resolved port."""

    name: str
    job: Job
    index: int
    host: str
    port: int
    #: Its share of the host's cores and GPUs (tui.plan.allocation), e.g. ``1 core, GPU 0``.
    share: str = ""
    #: The same share in a few characters for the task table, e.g. ``1c/2t g0``.
    share_brief: str = ""
    #: Where the host's launcher put it, when it chooses (``hpc/node3 job 812`` in Slurm).
    placed: str = ""

    @property
    def address(self) -> str:
        return f"{self.placed or self.host}:{self.port}"


@dataclass(frozen=True)
class TaskPlan:
    """Everything needed to launch one task, and to record how it was launched."""

    spec: TaskSpec
    host: HostSpec
    port: int
    tf_config: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None
    #: The task's share of its host (None: planned without an allocation).
    share: TaskShare | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def info(self) -> TaskInfo:
        share = self.share
        return TaskInfo(self.spec.name, self.spec.job, self.spec.index, self.spec.host, self.port,
                        share.describe() if share is not None else "",
                        share.brief() if share is not None else "",
                        placed=self.host.label if self.host.label != self.spec.host else "")

    @property
    def command(self) -> str:
        """The command line, shell-quoted."""
        return shlex.join(self.argv)

    @property
    def shell_command(self) -> str:
        """A line that reruns the task by hand from a shell (TF_CONFIG and the variables of
        its share of the host included)."""
        cd = f"cd {shell_path(self.cwd)} && " if self.cwd else ""
        share = self.share.env() if self.share is not None else {}
        words = [f"{k}={shlex.quote(self.env[k])}" for k in share if k in self.env]
        return cd + " ".join([*words, f"TF_CONFIG={shlex.quote(self.tf_config)}", self.command])


def shell_path(path: str) -> str:
    """``path`` quoted for a shell, keeping a leading ``~/`` for the shell to expand (a
    remote host's workdir: its home is not ours to name)."""
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


def program_for(config: ClusterConfig, *, trainer_argv: Sequence[str] = TRAINER_ARGV,
                hold: bool = True) -> TaskProgram:
    """What ``config``'s tasks run: its ``program:``, else the built-in trainer (launched
    with ``--hold`` when ``hold``)."""
    if config.program is not None:
        return UserProgram(config.program, workers=len(config.of_job(Job.WORKER) + config.of_job(Job.CHIEF)))
    return BuiltinTrainer(trainer_argv=trainer_argv, hold=hold)


def tf_config(config: ClusterConfig, ports: Mapping[str, int], task: TaskSpec,
              placement: Mapping[str, HostSpec] | None = None,
              cluster: Mapping[str, list[str]] | None = None) -> dict[str, Any]:
    """The TF_CONFIG of ``task``: the whole cluster spec plus the task's own place in it. A
    job appears only when the cluster has tasks of it (``chief`` only with a chief).
    ``placement``: the host each task was placed on by its launcher (Slurm's nodes);
    ``cluster``: :func:`cluster_spec` of the same, made once for every task of a run."""
    if cluster is None:
        cluster = cluster_spec(config, ports, placement)
    return {"cluster": cluster, "task": {"type": task.job.value, "index": task.index}}


def cluster_spec(config: ClusterConfig, ports: Mapping[str, int],
                 placement: Mapping[str, HostSpec] | None = None) -> dict[str, list[str]]:
    """TF_CONFIG's ``cluster``: every job's addresses (see :func:`tf_config`)."""
    placed = placement or {}
    cluster = {job.value: [config.address_of(t, ports[t.name], placed.get(t.name))
                           for t in config.of_job(job)] for job in _CLUSTER_JOBS}
    return {job: tasks for job, tasks in cluster.items() if tasks or job != Job.CHIEF.value}


def plan_run(config: ClusterConfig, settings: TrainingSettings, ports: Mapping[str, int],
             run_id: str, *, program: TaskProgram | None = None,
             trainer_argv: Sequence[str] = TRAINER_ARGV, local_python: str = sys.executable,
             hold: bool = True, run_dir: Path | None = None,
             controller: ControllerId | None = None,
             allocation: Allocation | None = None,
             placement: Mapping[str, HostSpec] | None = None,
             without: frozenset[str] = frozenset()) -> tuple[TaskPlan, ...]:
    """One plan per task, in the config's order. ``ports`` maps task names to resolved
    ports (``auto`` already chosen); ``program`` defaults to :func:`program_for` (with
    ``trainer_argv`` and ``hold``); ``run_dir`` (the run's directory) gives the default
    checkpoint directory; ``allocation`` (:func:`tui.plan.allocation.allocate`) adds each task's
    share to its environment, whatever program it runs; ``placement`` (from
    :class:`~tui.launch.base.ConnectReport`) the node each Slurm task runs on. The tasks named
    in ``without`` get no plan (their hosts failed); their addresses stay in the cluster."""
    program = program or program_for(config, trainer_argv=trainer_argv, hold=hold)
    plans = []
    # Every task's TF_CONFIG holds the whole cluster: its addresses are made once, not once
    # per task (a run of 256 tasks looked up 65,536 of them).
    cluster = cluster_spec(config, ports, placement)
    # (A command's {ps_hosts} are the config's hosts, where a Slurm task was placed or not.)
    addresses = cluster_spec(config, ports) if placement else cluster
    for spec in config.tasks:
        if spec.name in without:
            continue
        host = (placement or {}).get(spec.name) or config.host_of(spec)
        kind = kind_of(host)
        python = kind.python(host, local_python)
        ctx = TaskContext(config=config, spec=spec, host=host, ports=ports, settings=settings,
                          run_id=run_id, run_dir=run_dir, python=python, kind=kind, addresses=addresses)
        command = program.command(ctx)
        config_json = json.dumps(tf_config(config, ports, spec, cluster=cluster), separators=(",", ":"))
        share = allocation.shares.get(spec.name) if allocation is not None else None
        share_env = share.env() if share is not None else {}
        # Thread counts the user set in hosts.yaml's env win over ours; the GPU list does not
        # (the probe already read the host's own CUDA_VISIBLE_DEVICES and chose from it).
        gpu_env = {k: share_env.pop(k) for k in (VISIBLE_GPUS_ENV, GROWTH_ENV) if k in share_env}
        env = {
            **share_env,
            **host.env,
            **gpu_env,
            "TF_CONFIG": config_json,
            # Events must reach us line by line, not in 8 KB blocks.
            "PYTHONUNBUFFERED": "1",
            RUN_ID_ENV: run_id,
            **command.env,
            # Whose task this is: the sweep leaves tasks of a live controller alone.
            CONTROLLER_ENV: str(controller or this_controller()),
        }
        if spec.port is None and program.holds:
            env[protocol.PORT_HELD_ENV] = "1"  # we hold the auto port until `go`; see trainer.portclaim
        if kind.sets_pythonpath:
            # The command's own (PYTHONPATH=src python train.py) wins, as host env does.
            inherited = command.env.get("PYTHONPATH") or \
                host.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            root = trainer_root()
            ours = (str(root), *(str(root.joinpath(*p.split("/"))) for p in command.python_path))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (*ours, inherited) if p)
        plans.append(TaskPlan(spec=spec, host=host, port=ports[spec.name], tf_config=config_json,
                              argv=command.argv, env=env, cwd=command.cwd, share=share))
    return tuple(plans)
