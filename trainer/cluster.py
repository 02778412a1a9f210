"""Cluster membership and this task's role, from TF_CONFIG or the seeds' flags. Stdlib only."""

from __future__ import annotations

import json
from dataclasses import dataclass


class UsageError(Exception):
    """A bad command line or environment: the trainer exits 2 with this message."""


@dataclass(frozen=True)
class Cluster:
    """The ``ps`` and ``worker`` jobs, as host:port lists."""

    ps: tuple[str, ...]
    worker: tuple[str, ...]

    def spec(self) -> dict[str, list[str]]:
        return {"ps": list(self.ps), "worker": list(self.worker)}


@dataclass(frozen=True)
class Role:
    """This process's job (``ps`` or ``worker``) and index. Worker 0 is the chief."""

    job: str
    index: int

    @property
    def is_chief(self) -> bool:
        return self.job == "worker" and self.index == 0


def _split_hosts(text: str | None) -> tuple[str, ...]:
    return tuple(h.strip() for h in (text or "").split(",") if h.strip())


def resolve(tf_config: str | None, ps_hosts: str | None, worker_hosts: str | None,
            job_name: str | None, task_index: str | None,
            need_role: bool = True) -> tuple[Cluster, Role | None]:
    """Cluster and role from the seeds' flags when given, else from TF_CONFIG."""
    if ps_hosts or worker_hosts:
        cluster = Cluster(_split_hosts(ps_hosts), _split_hosts(worker_hosts))
        role = None
        if job_name is not None or task_index is not None or need_role:
            role = _role(job_name, task_index, "--job_name", "--task_index")
    elif tf_config:
        cluster, role = _from_tf_config(tf_config, need_role)
    else:
        raise UsageError("no cluster given: set TF_CONFIG or pass --ps_hosts and --worker_hosts")
    if not cluster.ps:
        raise UsageError("the cluster has no ps task")
    if not cluster.worker:
        raise UsageError("the cluster has no worker task")
    for address in cluster.ps + cluster.worker:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UsageError(f"bad task address {address!r}: expected host:port")
    if len(set(cluster.ps + cluster.worker)) != len(cluster.ps + cluster.worker):
        raise UsageError("two tasks share one host:port")
    if role is not None:
        size = len(cluster.ps if role.job == "ps" else cluster.worker)
        if role.index >= size:
            raise UsageError(f"task {role.job}{role.index} is not in the cluster "
                             f"(it has {size} {role.job} task{'s' if size != 1 else ''})")
    return cluster, role


def _role(job: object, index: object, job_key: str, index_key: str) -> Role:
    if job not in ("ps", "worker"):
        raise UsageError(f"{job_key} must be 'ps' or 'worker', got {job!r}")
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise UsageError(f"{index_key} must be an integer >= 0, got {index!r}")
    return Role(str(job), index)


def _from_tf_config(text: str, need_role: bool) -> tuple[Cluster, Role | None]:
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"TF_CONFIG is not valid JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("cluster"), dict):
        raise UsageError('TF_CONFIG must be an object with a "cluster" object')
    jobs = body["cluster"]
    unknown = set(jobs) - {"ps", "worker", "chief"}
    if unknown:
        raise UsageError(f"TF_CONFIG cluster has unsupported jobs: {', '.join(sorted(unknown))}")
    if "chief" in jobs:
        raise UsageError('TF_CONFIG "chief" job is not supported: worker 0 is the chief')
    lists = []
    for job in ("ps", "worker"):
        hosts = jobs.get(job, [])
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise UsageError(f'TF_CONFIG cluster "{job}" must be a list of "host:port" strings')
        lists.append(tuple(hosts))
    cluster = Cluster(lists[0], lists[1])
    task = body.get("task")
    if task is None:
        if need_role:
            raise UsageError('TF_CONFIG has no "task": expected {"type": ..., "index": ...}')
        return cluster, None
    if not isinstance(task, dict):
        raise UsageError('TF_CONFIG "task" must be an object {"type": ..., "index": ...}')
    return cluster, _role(task.get("type"), task.get("index"), 'TF_CONFIG task "type"',
                          'TF_CONFIG task "index"')
