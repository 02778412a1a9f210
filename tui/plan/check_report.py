"""What ``tfdist-tui check`` found (:mod:`tui.plan.dryrun` finds it): each host's answers and
its part of the plan, every problem as a typed record, and the two ways it is printed (lines
for people, one JSON document for CI)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum

from tui.common.terminal import inert
from tui.common.units import format_bytes
from tui.launch.look import CopyFinding


class ProblemKind(Enum):
    """What a problem is about; its JSON name is the value."""

    CONNECT = "connect"          # the host could not be reached or asked
    PYTHON = "python"            # its interpreter is missing or did not run the probe
    TENSORFLOW = "tensorflow"
    DISK = "disk"                # too little free where the run writes
    PORT = "port"                # a fixed port is taken
    COPY = "copy"                # the trainer's or the upload: folder's copy
    PARTITION = "partition"      # a Slurm partition
    PLAN = "plan"                # the plan cannot be made (shares, placement)


@dataclass(frozen=True)
class Problem:
    """One reason the run would not start; ``host`` is None for the plan's own."""

    kind: ProblemKind
    message: str
    host: str | None = None

    def __str__(self) -> str:
        return f"{self.host}: {self.message}" if self.host else self.message

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "kind": self.kind.value, "message": self.message}


@dataclass(frozen=True)
class HostCheck:
    """What one host answered (empty where it could not be asked), its part of the plan
    (what it offers, its tasks' shares, the bytes on its ps tasks) and its problems."""

    host: str
    tasks: tuple[str, ...]
    python: str = ""
    python_version: str = ""
    tf_version: str = ""
    disk_folder: str = ""
    disk_free: int | None = None
    offers: str = ""
    shares: dict[str, str] = field(default_factory=dict)
    ps_bytes: dict[str, int] = field(default_factory=dict)
    copies: tuple[CopyFinding, ...] = ()
    problems: tuple[Problem, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "tasks": list(self.tasks), "python": self.python,
                "python_version": self.python_version, "tf_version": self.tf_version,
                "disk_folder": self.disk_folder, "disk_free": self.disk_free, "offers": self.offers,
                "shares": self.shares, "ps_bytes": self.ps_bytes,
                "copies": [{"name": c.name, "path": c.path, "state": c.state.value, "size": c.size,
                            "detail": c.detail} for c in self.copies],
                "problems": [p.to_dict() for p in self.problems]}


@dataclass(frozen=True)
class CheckReport:
    """The dry run's findings: each host's, the plan's, and every problem."""

    hosts: tuple[HostCheck, ...]
    shares: dict[str, str] = field(default_factory=dict)
    placement: str = ""
    plan_problems: tuple[Problem, ...] = ()

    @property
    def problems(self) -> tuple[Problem, ...]:
        return (*(p for h in self.hosts for p in h.problems), *self.plan_problems)

    def to_json(self) -> str:
        return json.dumps({"ok": not self.problems, "problems": [p.to_dict() for p in self.problems],
                           "hosts": [h.to_dict() for h in self.hosts], "shares": self.shares,
                           "placement": self.placement}, indent=2)

    def lines(self) -> list[str]:
        out = []
        total = sum(b for h in self.hosts for b in h.ps_bytes.values()) or 1
        for h in self.hosts:
            found = ", ".join(part for part in (
                f"Python {h.python_version}" if h.python_version else "",
                f"TensorFlow {h.tf_version}" if h.tf_version else "",
                f"{format_bytes(h.disk_free)} free in {h.disk_folder}" if h.disk_free is not None else "",
                h.offers,
            ) if part)
            mark = "ok" if not h.problems else "PROBLEM"
            out.append(f"{h.host:<12} {mark:<8} tasks {', '.join(h.tasks)}" + (f"; {found}" if found else ""))
            if h.shares:
                out.append(f"{'':<12} shares " + "; ".join(f"{t} {share}" for t, share in h.shares.items()))
            if h.ps_bytes:
                out.append(f"{'':<12} holds " + "; ".join(f"{task} {format_bytes(size)} ({size / total:.0%})"
                                                        for task, size in h.ps_bytes.items()))
            out += [f"{'':<12} {c.describe()}" for c in h.copies if c.ok]
            out += [f"{'':<12} - {p.message}" for p in h.problems]
        if self.placement:
            out.append(f"placement: {self.placement}")
        out += [f"problem: {p.message}" for p in self.plan_problems]
        count = len(self.problems)
        out.append("the run could start" if not count else
                   f"{count} problem{'s' if count != 1 else ''}: the run would not start")
        return [inert(line) for line in out]
