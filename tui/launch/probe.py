"""What a host offers, as probed before anything starts: the CPU ids our processes may use,
its cgroup quota and its GPUs (read without TensorFlow). This machine is probed here; remote
hosts run the same snippet (:mod:`tui.launch.snippets.resources`) over their launcher.
:mod:`tui.plan.allocation` divides what a host offers among its tasks."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from tui.launch.snippets import resources as probe_snippet


@dataclass(frozen=True)
class HostResources:
    """What a host offers: CPU ids we may use, its cgroup quota in cores (None: none), and
    GPU ids as ``CUDA_VISIBLE_DEVICES`` names them."""

    cpus: tuple[int, ...]
    quota: float | None = None
    gpus: tuple[str, ...] = ()

    @property
    def cores(self) -> int:
        """Cores our processes can keep busy: the affinity set, capped by the quota."""
        count = max(1, len(self.cpus))
        if self.quota is not None:
            count = min(count, max(1, math.ceil(self.quota)))
        return count

    @classmethod
    def from_probe(cls, answer: object) -> HostResources:
        """From the resource snippet's JSON answer. Raises ValueError for anything else."""
        if not isinstance(answer, dict):
            raise ValueError(f"expected a mapping, got {answer!r}")
        cpus, quota, gpus = answer.get("cpus"), answer.get("quota"), answer.get("gpus")
        if not isinstance(cpus, list) or not all(isinstance(c, int) for c in cpus):
            raise ValueError(f"cpus: expected a list of CPU ids, got {cpus!r}")
        if quota is not None and not (isinstance(quota, (int, float)) and quota > 0):
            raise ValueError(f"quota: expected a positive number, got {quota!r}")
        if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
            raise ValueError(f"gpus: expected a list of device ids, got {gpus!r}")
        return cls(tuple(cpus), None if quota is None else float(quota), tuple(gpus))

    def describe(self) -> str:
        """``2 cores, no GPU`` / ``16 cores (quota 8), GPUs 0,1``."""
        quota = f" (quota {self.quota:g})" if self.quota is not None else ""
        gpus = f"GPUs {','.join(self.gpus)}" if self.gpus else "no GPU"
        return f"{self.cores} cores{quota}, {gpus}"


def probe_local(env: Mapping[str, str] | None = None) -> HostResources:
    """This machine, as a task started with ``env`` added to our environment sees it."""
    environ = {**os.environ, **(env or {})}
    return HostResources(tuple(probe_snippet.cpu_ids()), probe_snippet.cpu_quota(),
                         tuple(probe_snippet.gpu_ids(environ)))
