"""A hosts.yaml as a Kubeflow ``TFJob`` (``kubeflow.org/v1``) manifest.

Each job of the cluster becomes a replica spec (``PS``, ``Worker``, ``Chief``, ``Evaluator``).
The commands come from :func:`tui.plan.tasks.plan_run` on a copy of the config whose tasks sit at
the addresses TFJob's operator gives them (``<name>-<type>-<index>.<namespace>.svc:2222``), so
placeholders and the built-in trainer's flags resolve exactly as the operator's own TF_CONFIG
will say. Pure: a dict out, no YAML writing and no processes.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui.config.cluster import ClusterConfig, HostSpec, RestartMode, TaskSpec
from tui.interop.tfjob_schema import (
    API_VERSION,
    CONTAINER_NAME,
    CONTAINER_PYTHON,
    GPU_RESOURCE,
    KIND,
    PORT,
    PORT_NAME,
    REPLICA_TYPES,
    TO_TFJOB_RESTART,
)
from tui.plan.tasks import CONTROLLER_ONLY_ENV, TaskPlan, plan_run, program_for
from tui.program.base import TaskProgram

_DROPPED_ENV = CONTROLLER_ONLY_ENV | {"TF_CONFIG", "PYTHONPATH"}
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class ExportError(Exception):
    """The cluster cannot be expressed in the requested form; the message says why."""


@dataclass(frozen=True)
class TFJobOptions:
    """Names and image of the manifest."""

    name: str
    namespace: str = "default"
    image: str = "tensorflow/tensorflow:latest"


def job_name_from(text: str) -> str:
    """A valid TFJob name (a DNS label) made from ``text``, e.g. a hosts.yaml's stem."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return name or "tfdist"


def check_name(name: str, what: str) -> None:
    """Raise :class:`ExportError` unless ``name`` is a DNS label, as Kubernetes requires."""
    if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        raise ExportError(f"{what} {name!r} is not a valid Kubernetes name "
                          "(lower-case letters, digits and '-', at most 63)")


def service_host(options: TFJobOptions, task: TaskSpec) -> str:
    """The DNS name the operator's headless service gives ``task``."""
    return f"{options.name}-{task.job.value}-{task.index}.{options.namespace}.svc"


def standalone_program(config: ClusterConfig) -> TaskProgram:
    """What ``config``'s tasks run when no controller of ours is there: the built-in trainer
    without its hold for our "go"; a user's program as written, without the shim (it
    expects our controller on its stdin) and without an upload (the program is where the
    task runs: in the image, in the host's workdir)."""
    if config.program is None:
        return program_for(config, hold=False)
    return program_for(dataclasses.replace(
        config, program=dataclasses.replace(config.program, shim=False, upload=None)))


def kubernetes_plans(config: ClusterConfig, options: TFJobOptions) -> tuple[TaskPlan, ...]:
    """Every task's plan as it will run in its pod: its address is its service's, its Python
    the image's, and nothing waits for our controller."""
    hosts: dict[str, HostSpec] = {}
    tasks = []
    for task in config.tasks:
        host = service_host(options, task)
        hosts[host] = HostSpec(name=host, address=host, python=CONTAINER_PYTHON, workdir=".")
        tasks.append(dataclasses.replace(task, host=host, port=PORT))
    pods = dataclasses.replace(config, hosts=hosts, tasks=tuple(tasks))
    return plan_run(pods, pods.training, {t.name: PORT for t in tasks}, options.name,
                    program=standalone_program(config))


def tfjob_manifest(config: ClusterConfig, options: TFJobOptions) -> dict[str, Any]:
    """The ``TFJob`` resource for ``config``, ready for ``yaml.safe_dump``."""
    check_name(options.name, "job name")
    check_name(options.namespace, "namespace")
    plans = kubernetes_plans(config, options)
    specs: dict[str, Any] = {}
    total_restarts = 0
    for job in dict.fromkeys(t.job for t in config.tasks):
        replica_type = REPLICA_TYPES.get(job.value)
        if replica_type is None:
            raise ExportError(f"TFJob has no replica type for the {job.value!r} job")
        job_plans = [p for p in plans if p.spec.job is job]
        policy = config.restart_policy(job)
        if policy.policy is RestartMode.ON_FAILURE:
            total_restarts += policy.max_restarts * len(job_plans)
        specs[replica_type] = {
            "replicas": len(job_plans),
            "restartPolicy": TO_TFJOB_RESTART[policy.policy],
            "template": {"spec": {"containers": [_container(job_plans, options)]}},
        }
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": options.name, "namespace": options.namespace},
        "spec": {
            # The job ends when the chief (worker 0 without a Chief) succeeds; "Running"
            # then deletes the pods still up, the ps above all, which never exit by themselves.
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": total_restarts},
            "tfReplicaSpecs": specs,
        },
    }


def _container(plans: Sequence[TaskPlan], options: TFJobOptions) -> dict[str, Any]:
    """One container for all the replicas of a job. When their commands differ (``{index}``
    in a program's command, a task's own ``gpus:``), a small ``sh`` script picks each
    replica's own command by the index at the end of its pod's host name."""
    container: dict[str, Any] = {"name": CONTAINER_NAME, "image": options.image}
    commands = [list(p.argv) for p in plans]
    if all(c == commands[0] for c in commands):
        container["command"] = commands[0]
    else:
        # Kubernetes cuts a pod's host name at 63 characters, which would cut off the index.
        longest = f"{options.name}-{plans[-1].spec.job.value}-{plans[-1].spec.index}"
        if len(longest) > 63:
            raise ExportError(f"job name {options.name!r} is too long for the {plans[-1].spec.job.value} "
                              f"replicas, whose commands differ: {longest!r} is over 63 characters")
        cases = " ".join(f"{i}) exec {shlex.join(c)} ;;" for i, c in enumerate(commands))
        container["command"] = ["sh", "-c", f'case "${{HOSTNAME##*-}}" in {cases} '
                                            f'*) echo "unknown replica $HOSTNAME" >&2; exit 2 ;; esac']
    env = {k: v for k, v in plans[0].env.items() if k not in _DROPPED_ENV}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    container["ports"] = [{"name": PORT_NAME, "containerPort": PORT}]
    gpus = max((p.spec.gpus or 0) for p in plans)
    if gpus:
        container["resources"] = {"limits": {GPU_RESOURCE: gpus}}
    return container
