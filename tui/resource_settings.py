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
from typing import Any, Protocol


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


OVERRIDE_KEYS = ("cores", "intra_op", "inter_op")
_TOP_KEYS = ("threads", "pin", "memory_growth")


class Loader(Protocol):
    """The hosts.yaml loader's helpers this parser uses (tui.config._Loader)."""

    def error(self, node: Any, message: str) -> Exception: ...

    def mapping(self, node: Any, where: str, expected: str = ...) -> Mapping[str, Any]: ...

    def check_keys(self, items: Mapping[str, Any], allowed: Iterable[str], where: str) -> None: ...

    def scalar(self, node: Any, where: str, expected: str) -> Any: ...

    def typed(self, node: Any, where: str) -> object: ...

    def integer(self, node: Any, where: str, minimum: int) -> int: ...

    def describe(self, node: Any) -> str: ...


def parse(loader: Loader, node: Any, jobs: Iterable[str], tasks: Iterable[str]) -> ResourceSettings:
    """The ``resources:`` section at ``node``; ``jobs`` and ``tasks`` name what may be
    overridden (the cluster's job and task names). Raises the loader's located errors."""
    jobs, tasks = tuple(jobs), tuple(tasks)
    items = loader.mapping(node, "resources", "a mapping of threads:, pin:, memory_growth: "
                                              "and per-job or per-task overrides")
    loader.check_keys(items, (*_TOP_KEYS, *jobs, *tasks), "resources")
    settings: dict[str, Any] = {}
    if "threads" in items:
        value_node = items["threads"].value
        allowed = tuple(mode.value for mode in ThreadsMode)
        value = loader.typed(loader.scalar(value_node, "resources.threads", " or ".join(allowed)),
                             "resources.threads")
        if value not in allowed:
            raise loader.error(value_node, f"resources.threads: expected one of {', '.join(allowed)}, "
                                           f"got {loader.describe(value_node)}")
        settings["threads"] = ThreadsMode(value)
    for key in ("pin", "memory_growth"):
        if key in items:
            value_node = items[key].value
            value = loader.typed(loader.scalar(value_node, f"resources.{key}", "true or false"),
                                 f"resources.{key}")
            if not isinstance(value, bool):
                raise loader.error(value_node, f"resources.{key}: expected true or false, "
                                               f"got {loader.describe(value_node)}")
            settings[key] = value
    overrides: dict[str, TaskOverride] = {}
    for name in (*jobs, *tasks):
        if name in items:
            overrides[name] = _override(loader, items[name].value, f"resources.{name}")
    return ResourceSettings(**settings, overrides=overrides)


def load(loader: Loader, item: Any, jobs: Iterable[str], tasks: Iterable[Any]) -> ResourceSettings:
    """The hosts.yaml loader's hook: the top-level ``resources:`` item (None: absent, the
    defaults) for the cluster's ``tasks`` (TaskSpecs)."""
    if item is None:
        return ResourceSettings()
    return parse(loader, item.value, jobs, [task.name for task in tasks])


def _override(loader: Loader, node: Any, where: str) -> TaskOverride:
    items = loader.mapping(node, where, "a mapping of cores:, intra_op:, inter_op:")
    loader.check_keys(items, OVERRIDE_KEYS, where)
    values = {key: loader.integer(items[key].value, f"{where}.{key}", 1)
              for key in OVERRIDE_KEYS if key in items}
    return TaskOverride(**values)
