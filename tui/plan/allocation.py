"""Per-host resources: what each host offers (cores, GPUs) and each task's share of it.

Every TensorFlow process sizes its thread pools for the whole machine and maps every GPU it
sees. The controller knows every task on every host, so it hands each one its share instead:
:func:`allocate` is a pure function of the config and the hosts' probes (tests give it
probes of their own); :meth:`TaskShare.env` is what a task's environment gets from it.

- CPU: a host's cores (affinity, capped by its cgroup quota) are divided among its tasks,
  workers first for the cores left over; a worker's intra-op pool is twice its share (see
  :data:`WORKER_OVERSUBSCRIPTION`); ``resources:`` overrides cores and thread counts
  per job and per task; ``pin: true`` gives each task CPUs of its own (wrapping around
  when the host has fewer cores than tasks).
- GPUs: ps tasks see none unless their entry asks (``gpus: K``); a task asking ``gpus: K``
  gets K devices nobody else on its host gets, and asking for more than the host has is a
  :class:`ResourceError` before anything starts; other workers on a GPU host get
  ``training.gpus`` devices each, disjoint while there are enough and shared otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainer.threads import CPUS_ENV, INTER_OP_ENV, INTRA_OP_ENV
from tui.config.cluster import ClusterConfig, Job, TaskSpec, machine_of
from tui.config.resources import ResourceSettings, ThreadsMode
from tui.launch.probe import HostResources, probe_local

#: Environment variables a task's share sets besides :mod:`trainer.threads`' (which the
#: trainer reads; TensorFlow and OpenMP read the thread counts in any program).
OMP_ENV = "OMP_NUM_THREADS"
VISIBLE_GPUS_ENV = "CUDA_VISIBLE_DEVICES"
GROWTH_ENV = "TF_FORCE_GPU_ALLOW_GROWTH"
#: Fewer inter-op threads than this serialise a task's graph: one blocking op (a queue
#: dequeue, a RecvTensor) would hold up every other one.
MIN_INTER_OP = 2
#: A worker's intra-op pool is this many times its share of the cores (capped at the host's
#: cores). A worker waits for the ps for most of each step (``python -m bench.training.step_profile``:
#: 6.6 of 7.6 ms for the mlp on 2 cores), so counting every task as busy all the time
#: starves the bursts in between: intra-op = the bare share made 1 ps + 2 workers on 2 cores
#: 22-25 % slower than TensorFlow's defaults (``python -m bench.training.scaling``). A ps keeps its
#: bare share: its ops are tiny element-wise updates, its RPCs run on gRPC's own threads.
WORKER_OVERSUBSCRIPTION = 2


class ResourceError(Exception):
    """A resource request no host can satisfy (the message names host and counts)."""


@dataclass(frozen=True)
class TaskShare:
    """One task's share of its host. ``intra_op``/``inter_op`` None: TensorFlow's defaults;
    ``cpus`` None: not pinned; ``gpus`` None: the task's GPU visibility is left alone (its
    host has none to share)."""

    cores: int
    intra_op: int | None
    inter_op: int | None
    cpus: tuple[int, ...] | None = None
    gpus: tuple[str, ...] | None = None
    memory_growth: bool = True

    def env(self) -> dict[str, str]:
        """The environment variables that give a task this share."""
        env: dict[str, str] = {}
        if self.intra_op is not None:
            env[INTRA_OP_ENV] = env[OMP_ENV] = str(self.intra_op)
        if self.inter_op is not None:
            env[INTER_OP_ENV] = str(self.inter_op)
        if self.cpus is not None:
            env[CPUS_ENV] = ",".join(str(c) for c in self.cpus)
        if self.gpus is not None:
            env[VISIBLE_GPUS_ENV] = ",".join(self.gpus)
            if self.gpus:
                env[GROWTH_ENV] = "true" if self.memory_growth else "false"
        return env

    def describe(self) -> str:
        """The share in a few words: ``1 core`` / ``2 cores (4 threads), GPU 0,1`` (intra-op
        threads where they differ from the cores); ``? cores`` for a host not probed."""
        text = f"{self.cores or '?'} core{'s' if self.cores != 1 else ''}"
        if self.intra_op is not None and self.intra_op != self.cores:
            text += f" ({self.intra_op} threads)"
        if self.cpus is not None:
            text += f" (cpu {','.join(str(c) for c in self.cpus)})"
        if self.gpus:
            text += f", GPU {','.join(self.gpus)}"
        return text

    def brief(self) -> str:
        """The share in a task-table cell: ``1c`` / ``2c/4t g0,1`` (cores, intra-op threads
        where they differ, GPUs); ``?c`` for a host not probed. Pinned CPUs are left to
        :meth:`describe`: the table has no room for them."""
        text = f"{self.cores or '?'}c"
        if self.intra_op is not None and self.intra_op != self.cores:
            text += f"/{self.intra_op}t"
        if self.gpus:
            text += f" g{','.join(self.gpus)}"
        return text


@dataclass(frozen=True)
class Allocation:
    """Every task's share, by task name, and notes worth a warning (shared GPUs)."""

    shares: Mapping[str, TaskShare]
    notes: tuple[str, ...] = ()


def machine_key(config: ClusterConfig, task: TaskSpec) -> str:
    """Tasks with the same key run on one machine (an entry and its address, or
    ``localhost`` and ``127.0.0.1``, are one machine)."""
    return machine_of(config.host_of(task).address)


def host_offers(config: ClusterConfig, remote: Mapping[str, HostResources | None]
                ) -> dict[str, HostResources | None]:
    """Every task host's probe: localhost probed here (with its hosts.yaml env), remote
    hosts from ``remote`` (what the launcher found; None or absent: unknown)."""
    offers: dict[str, HostResources | None] = {}
    for task in config.tasks:
        if task.host not in offers:
            host = config.host_of(task)
            offers[task.host] = probe_local(host.env) if host.is_local else remote.get(task.host)
    return offers


async def allocate_for(config: ClusterConfig, remote: Mapping[str, HostResources | None]) -> Allocation:
    """:func:`allocate` with :func:`host_offers`; the local probe (which may run nvidia-smi)
    runs in a thread. Raises :class:`ResourceError`."""
    offers = await asyncio.to_thread(host_offers, config, remote)
    return allocate(config, offers)


def allocate(config: ClusterConfig, hosts: Mapping[str, HostResources | None]) -> Allocation:
    """Each task's share of its host, from each task host's probe. A host without a probe
    (None or absent) gets no thread settings and keeps its GPU visibility, except that its
    ps tasks see no GPU. Raises :class:`ResourceError` for a GPU request its host cannot
    satisfy."""
    settings = config.resources
    by_machine: dict[str, list[TaskSpec]] = {}
    for task in config.tasks:
        by_machine.setdefault(machine_key(config, task), []).append(task)
    shares: dict[str, TaskShare] = {}
    notes: list[str] = []
    for tasks in by_machine.values():
        host_name = tasks[0].host
        offer = hosts.get(host_name)
        if offer is None:
            for task in tasks:
                shares[task.name] = TaskShare(0, None, None, gpus=() if task.job is Job.PS else None,
                                              memory_growth=settings.memory_growth)
            continue
        cores = _divide_cores(tasks, offer.cores, settings)
        gpus = _divide_gpus(tasks, offer.gpus, config.training.gpus, host_name, notes)
        offset = 0
        for task in tasks:
            override = settings.override_for(task.job.value, task.name)
            n = cores[task.name]
            pinned = None
            if settings.pin and offer.cpus:
                pinned = tuple(sorted({offer.cpus[(offset + k) % len(offer.cpus)] for k in range(n)}))
                offset += n
            threads = n if task.job is Job.PS or settings.pin else \
                min(offer.cores, WORKER_OVERSUBSCRIPTION * n)
            intra_op = override.intra_op or threads
            auto = settings.threads is ThreadsMode.AUTO
            shares[task.name] = TaskShare(
                cores=n,
                intra_op=intra_op if auto or override.intra_op else None,
                inter_op=override.inter_op or (max(MIN_INTER_OP, intra_op) if auto else None),
                cpus=pinned, gpus=gpus[task.name], memory_growth=settings.memory_growth)
    return Allocation(shares, tuple(notes))


def _divide_cores(tasks: Sequence[TaskSpec], cores: int, settings: ResourceSettings) -> dict[str, int]:
    """Cores per task: overrides as given, the rest split evenly (at least one each), the
    remainder going to workers first since they do the computing."""
    fixed = {t.name: o.cores for t in tasks
             if (o := settings.override_for(t.job.value, t.name)).cores is not None}
    rest = [t for t in tasks if t.name not in fixed]
    rest.sort(key=lambda t: t.job is not Job.WORKER)  # stable: config order within a job
    left = max(0, cores - sum(fixed.values()))
    result = dict(fixed)
    if rest:
        base, extra = divmod(left, len(rest))
        for k, task in enumerate(rest):
            result[task.name] = max(1, base + (1 if k < extra else 0))
    return result


def _divide_gpus(tasks: Sequence[TaskSpec], gpus: Sequence[str], towers: int, host: str,
                 notes: list[str]) -> dict[str, tuple[str, ...] | None]:
    asked = {t.name: t.gpus for t in tasks if t.gpus is not None}
    total = sum(asked.values())
    if total > len(gpus):
        requests = ", ".join(f"{name}: {n}" for name, n in asked.items())
        raise ResourceError(f"host {host}: tasks ask for {total} GPU{'s' if total != 1 else ''} "
                            f"({requests}) but it has {len(gpus)}"
                            + (f" ({','.join(gpus)})" if gpus else ""))
    result: dict[str, tuple[str, ...] | None] = {}
    free = list(gpus)
    for task in tasks:
        if task.gpus is not None:
            result[task.name] = tuple(free[:task.gpus])
            del free[:task.gpus]
    implicit = [t for t in tasks if t.gpus is None and t.job is not Job.PS]
    shared = 0
    for task in tasks:
        if task.name in result:
            continue
        if task.job is Job.PS:
            result[task.name] = ()  # a ps only holds variables: keep it off the GPUs
        elif not gpus:
            result[task.name] = None
        elif len(free) >= towers:
            result[task.name] = tuple(free[:towers])
            del free[:towers]
        else:
            # More workers than GPUs: they share (round-robin), with memory growth on.
            result[task.name] = tuple(dict.fromkeys(gpus[(shared + k) % len(gpus)] for k in range(towers)))
            shared += towers
    if shared:
        notes.append(f"host {host}: {len(implicit)} workers share its {len(gpus)} GPU(s); "
                     "give each worker gpus: K in cluster: for devices of its own")
    return result
