"""A ``kind: slurm`` hosts entry: which allocation the controller asks Slurm for.

    hosts:
      hpc: {kind: slurm, partition: debug, nodes: 2, time: "01:00:00", account: proj,
            extra: [--qos=normal], pending_timeout: 300}

Read with the hosts.yaml loader's own helpers, so every mistake is located (file:line:column)
like any other config error. Slurm itself is asked nothing here: an unknown partition or
account is Slurm's to refuse, when the allocation is requested (:mod:`tui.launch.slurm.alloc`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tui.config import keys, salloc_options
from tui.config.yamlload import Item, NodeReader

#: Keys a ``kind: slurm`` entry may have besides ``kind``, ``python`` and ``env``.
KEYS = tuple(keys.SLURM_HOST)
#: Keys of other kinds that mean nothing for Slurm (it picks the machines).
NOT_FOR_SLURM = ("address", "port", "user", "identity", "known_hosts", "jump", "workdir")
#: Seconds a pending allocation may wait before the run is refused, unless set.
DEFAULT_PENDING_TIMEOUT = 300.0

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
# Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or no limit.
_TIME = re.compile(r"\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}(:\d{1,2}(:\d{1,2})?)?"
                   r"|UNLIMITED|INFINITE|unlimited|infinite")


@dataclass(frozen=True)
class SlurmSettings:
    """What to ask ``salloc`` for. None leaves the choice to Slurm (its default partition,
    the account's default, the partition's time limit)."""

    partition: str | None = None
    nodes: int = 1
    time: str | None = None
    account: str | None = None
    extra: tuple[str, ...] = ()
    pending_timeout: float = DEFAULT_PENDING_TIMEOUT
    #: Where this entry is in hosts.yaml (``file:line:column``), for Slurm's refusals, and
    #: where each of its keys' values is (a refused partition points at its name).
    origin: str = ""
    places: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: Set on the copy of the entry that one task runs on, once the allocation is granted.
    job_id: str | None = None
    node: str | None = None

    def salloc_options(self) -> list[str]:
        """The options of ``salloc`` for these settings (job name and holder excluded)."""
        options = [f"--nodes={self.nodes}"]
        if self.partition:
            options.append(f"--partition={self.partition}")
        if self.time:
            options.append(f"--time={self.time}")
        if self.account:
            options.append(f"--account={self.account}")
        return [*options, *self.extra]

    def as_yaml(self) -> dict[str, Any]:
        """The entry's keys as hosts.yaml writes them (for the run directory's record)."""
        values: dict[str, Any] = {"partition": self.partition, "nodes": self.nodes, "time": self.time,
                                  "account": self.account, "extra": list(self.extra) or None,
                                  "pending_timeout": self.pending_timeout}
        return {k: v for k, v in values.items() if v is not None}


def load(reader: NodeReader, items: Mapping[str, Item], where: str, is_slurm: bool) -> SlurmSettings | None:
    """The Slurm settings of one hosts entry (None for an entry of another kind, which may
    not have Slurm's keys)."""
    if not is_slurm:
        for key in KEYS:
            if key in items:
                raise reader.error(items[key].key, f"{where}.{key}: only a kind: slurm entry has {key}:")
        return None
    for key in NOT_FOR_SLURM:
        if key in items:
            raise reader.error(items[key].key, f"{where}.{key}: a kind: slurm entry has no {key}: "
                                               "(Slurm picks the nodes; tasks run in the controller's "
                                               "folder, which the nodes must share)")
    values: dict[str, Any] = {}
    for key in ("partition", "account"):
        if key in items:
            text = reader.text(items[key].value, f"{where}.{key}")
            if not _NAME.fullmatch(text):
                raise reader.error(items[key].value, f"{where}.{key}: {text!r} is not a Slurm {key} name")
            values[key] = text
    if "nodes" in items:
        values["nodes"] = reader.integer(items["nodes"].value, f"{where}.nodes", 1)
    if "time" in items:
        text = reader.text(items["time"].value, f"{where}.time")
        if not _TIME.fullmatch(text):
            raise reader.error(items["time"].value, f"{where}.time: expected a Slurm time limit "
                               f'(minutes, "HH:MM:SS" or "D-HH:MM:SS"), got {text!r}')
        values["time"] = text
    if "pending_timeout" in items:
        values["pending_timeout"] = reader.number(items["pending_timeout"].value,
                                                  f"{where}.pending_timeout", 1)
    if "extra" in items:
        values["extra"] = _extra(reader, items["extra"], where)
    def place(mark: Any) -> str:
        return f"{reader.label}:{mark.line + 1}:{mark.column + 1}"

    origin = place(next(iter(items.values())).key.start_mark) if items else reader.label
    places = {key: place(items[key].value.start_mark) for key in KEYS if key in items}
    return SlurmSettings(**values, origin=origin, places=places)


def _extra(reader: NodeReader, item: Item, where: str) -> tuple[str, ...]:
    nodes = list(reader.sequence(item.value, f"{where}.extra",
                                 "a list of salloc options, e.g. [--qos=normal]"))
    words = [reader.text(node, f"{where}.extra[{index}]") for index, node in enumerate(nodes)]
    _, refusal = salloc_options.parse(words)
    if refusal is not None:
        raise reader.error(nodes[refusal.index], f"{where}.extra[{refusal.index}]: {refusal.message}")
    return tuple(words)
