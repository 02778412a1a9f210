"""The ``resources:`` section of hosts.yaml: how the controller shares each host's CPU cores
and GPUs among the tasks placed there, and per-job / per-task overrides.

    resources:
      threads: auto        # auto: cores divided among a host's tasks; tensorflow: TF's defaults
      pin: false           # pin each task to cores of its own (os.sched_setaffinity)
      memory_growth: true  # TF_FORCE_GPU_ALLOW_GROWTH for tasks that see GPUs
      ps: {cores: 1}       # per job ...
      worker1: {intra_op: 2, inter_op: 2}   # ... and per task (wins over its job)

The parser walks the node tree with the hosts.yaml loader's own helpers, so its errors are
located (file:line:column) like every other config error."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from yaml.nodes import Node

from tui.config import keys
from tui.config.yamlload import Item, NodeReader


class ThreadsMode(str, Enum):
    """``auto``: the controller sets each task's thread pools from its share of the host's
    cores; ``tensorflow``: nothing is set, every task sizes its pools for the whole host."""

    AUTO = "auto"
    TENSORFLOW = "tensorflow"


@dataclass(frozen=True)
class TaskOverride:
    """What ``resources.<job or task>`` fixes; None leaves the computed value."""

    cores: int | None = None
    intra_op: int | None = None
    inter_op: int | None = None

    def over(self, base: TaskOverride) -> TaskOverride:
        """This override with ``base``'s values where this one has none."""
        return TaskOverride(*(mine if mine is not None else theirs for mine, theirs in
                              zip(self.fields(), base.fields(), strict=True)))

    def fields(self) -> tuple[int | None, int | None, int | None]:
        return self.cores, self.intra_op, self.inter_op


@dataclass(frozen=True)
class ResourceSettings:
    """The ``resources:`` section, with its defaults."""

    threads: ThreadsMode = ThreadsMode.AUTO
    pin: bool = False
    memory_growth: bool = True
    #: By job name (``ps``, ``worker``) and by task name (``worker1``).
    overrides: Mapping[str, TaskOverride] = field(default_factory=dict)

    def override_for(self, job: str, task: str) -> TaskOverride:
        """The task's own override over its job's."""
        empty = TaskOverride()
        return self.overrides.get(task, empty).over(self.overrides.get(job, empty))


OVERRIDE_KEYS = tuple(keys.RESOURCE_OVERRIDE)
_TOP_KEYS = tuple(keys.RESOURCES)


def parse(loader: NodeReader, node: Node, jobs: Iterable[str], tasks: Iterable[str]) -> ResourceSettings:
    """The ``resources:`` section at ``node``; ``jobs`` and ``tasks`` name what may be
    overridden (the cluster's job and task names). Raises the loader's located errors."""
    jobs, tasks = tuple(jobs), tuple(tasks)
    items = loader.mapping(node, "resources", "a mapping of threads:, pin:, memory_growth: "
                                              "and per-job or per-task overrides")
    loader.check_keys(items, (*_TOP_KEYS, *jobs, *tasks), "resources")
    settings: dict[str, Any] = {}
    if "threads" in items:
        settings["threads"] = loader.choice(items["threads"].value, "resources.threads", ThreadsMode)
    for key in ("pin", "memory_growth"):
        if key in items:
            settings[key] = loader.boolean(items[key].value, f"resources.{key}")
    overrides: dict[str, TaskOverride] = {}
    for name in (*jobs, *tasks):
        if name in items:
            overrides[name] = _override(loader, items[name].value, f"resources.{name}")
    return ResourceSettings(**settings, overrides=overrides)


def load(loader: NodeReader, item: Item | None, jobs: Iterable[str],
         tasks: Iterable[str]) -> ResourceSettings:
    """The hosts.yaml loader's hook: the top-level ``resources:`` item (None: absent, the
    defaults) for the cluster's jobs and task names."""
    if item is None:
        return ResourceSettings()
    return parse(loader, item.value, jobs, tasks)


def _override(loader: NodeReader, node: Node, where: str) -> TaskOverride:
    items = loader.mapping(node, where, "a mapping of cores:, intra_op:, inter_op:")
    loader.check_keys(items, OVERRIDE_KEYS, where)
    values = {key: loader.integer(items[key].value, f"{where}.{key}", 1)
              for key in OVERRIDE_KEYS if key in items}
    return TaskOverride(**values)
