"""What exactly each task of a run executes: command line, TF_CONFIG, environment.

Pure functions of the config, the training settings and the resolved ports, so the run
directory can record precisely what was launched and tests can check it without processes.
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
from tui.config import ClusterConfig, HostSpec, Job, TaskSpec
from tui.events import TaskInfo

#: How the trainer is invoked after the interpreter: ``python -m trainer <flags>``.
TRAINER_ARGV: tuple[str, ...] = ("-m", "trainer")
#: Makes the trainer import TensorFlow, load data and build its graph, announce ``loaded``,
#: then wait for :data:`GO_LINE` on stdin before starting its server: every task can be
#: launched at once and the servers still start in order.
HOLD_FLAG = "--hold"
GO_LINE = "go"
#: Names the run in each task's environment, so a task (or a test) can tell whose it is.
RUN_ID_ENV = "TFDIST_RUN_ID"
#: The run directory's subdirectory that holds its checkpoints, unless settings say otherwise.
CHECKPOINTS = "checkpoints"
#: The run directory's folder of TensorBoard event files (one subfolder per worker).
TENSORBOARD = "tensorboard"


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

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(self.spec.name, self.spec.job, self.spec.index, self.spec.host, self.port)

    @property
    def command(self) -> str:
        """The command line, shell-quoted."""
        return shlex.join(self.argv)

    @property
    def shell_command(self) -> str:
        """A line that reruns the task by hand from a shell (TF_CONFIG included)."""
        return f"TF_CONFIG={shlex.quote(self.tf_config)} {self.command}"


def trainer_root() -> Path:
    """The directory that holds the ``trainer`` package the controller itself imports; put
    on local tasks' PYTHONPATH so ``python -m trainer`` finds the same code."""
    return Path(protocol.__file__).resolve().parent.parent


def tf_config(config: ClusterConfig, ports: Mapping[str, int], task: TaskSpec) -> dict[str, Any]:
    """The TF_CONFIG of ``task``: the whole cluster spec plus the task's own place in it."""
    def address(t: TaskSpec) -> str:
        return f"{config.host_of(t).address}:{ports[t.name]}"

    return {
        "cluster": {
            Job.PS.value: [address(t) for t in config.ps_tasks],
            Job.WORKER.value: [address(t) for t in config.worker_tasks],
        },
        "task": {"type": task.job.value, "index": task.index},
    }


def default_checkpoint_dir(host: HostSpec, run_dir: Path, run_id: str) -> str:
    """Where a run checkpoints when ``checkpoint_dir`` is not set: its run directory on this
    machine, ``runs/<run id>/checkpoints`` under the host's workdir on a remote one. Without
    checkpoints a cluster restart (after a ps failed) would start training over."""
    return _in_run_dir(host, run_dir, run_id, CHECKPOINTS)


def default_summary_dir(host: HostSpec, run_dir: Path, run_id: str) -> str:
    """Where a run writes TensorBoard event files when ``summary_dir`` is not set: the
    ``tensorboard`` folder of its run directory (so ``tensorboard --logdir runs`` shows every
    run side by side); ``runs/<run id>/tensorboard`` under the workdir on a remote host."""
    return _in_run_dir(host, run_dir, run_id, TENSORBOARD)


def _in_run_dir(host: HostSpec, run_dir: Path, run_id: str, folder: str) -> str:
    if host.is_local:
        return str(run_dir.resolve() / folder)
    return f"runs/{run_id}/{folder}"


def plan_run(config: ClusterConfig, settings: TrainingSettings, ports: Mapping[str, int],
             run_id: str, *, trainer_argv: Sequence[str] = TRAINER_ARGV,
             local_python: str = sys.executable, hold: bool = True,
             run_dir: Path | None = None) -> tuple[TaskPlan, ...]:
    """One plan per task, in the config's order. ``ports`` maps task names to resolved
    ports (``auto`` already chosen); ``hold`` adds :data:`HOLD_FLAG`; ``run_dir`` (the
    run's directory) gives the default checkpoint and summary directories
    (:func:`default_checkpoint_dir`, :func:`default_summary_dir`)."""
    plans = []
    for spec in config.tasks:
        host = config.host_of(spec)
        task_settings = settings if spec.gpus is None else settings.replace(gpus=spec.gpus)
        if task_settings.checkpoint_dir is None and run_dir is not None:
            task_settings = task_settings.replace(
                checkpoint_dir=default_checkpoint_dir(host, run_dir, run_id))
        if task_settings.summary_dir is None and run_dir is not None:
            task_settings = task_settings.replace(
                summary_dir=default_summary_dir(host, run_dir, run_id))
        # Locally, default to the controller's own interpreter (which can import the
        # trainer) unless hosts.yaml names an interpreter for localhost explicitly.
        explicit_host = spec.host in config.hosts
        python = local_python if host.is_local and not explicit_host else host.python
        config_json = json.dumps(tf_config(config, ports, spec), separators=(",", ":"))
        env = {
            **host.env,
            "TF_CONFIG": config_json,
            # Events must reach us line by line, not in 8 KB blocks.
            "PYTHONUNBUFFERED": "1",
            RUN_ID_ENV: run_id,
        }
        if host.is_local:
            inherited = host.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(trainer_root()), inherited) if p)
        plans.append(TaskPlan(
            spec=spec,
            host=host,
            port=ports[spec.name],
            tf_config=config_json,
            argv=(python, *trainer_argv, *([HOLD_FLAG] if hold else []), *task_settings.to_argv()),
            env=env,
            cwd=None if host.is_local else host.workdir,
        ))
    return tuple(plans)
