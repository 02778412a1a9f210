"""A task's share of its host, as the controller hands it over in the environment
(tui.plan.allocation): thread-pool sizes for the session and server config, and the CPUs to pin
to. Standard library only; a task started by hand without these variables keeps
TensorFlow's defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

INTRA_OP_ENV = "TF_NUM_INTRAOP_THREADS"
INTER_OP_ENV = "TF_NUM_INTEROP_THREADS"
CPUS_ENV = "TFDIST_CPUS"


@dataclass(frozen=True)
class Threads:
    """Pool sizes (0: TensorFlow's default, sized for the whole machine) and pinned CPUs."""

    intra_op: int = 0
    inter_op: int = 0
    cpus: frozenset[int] | None = None


def _count(text: str | None) -> int:
    try:
        return max(0, int(text)) if text else 0
    except ValueError:
        return 0


def from_env(environ: Mapping[str, str] | None = None) -> Threads:
    """The share named by the environment; malformed values count as unset."""
    env = os.environ if environ is None else environ
    cpus: frozenset[int] | None = None
    text = env.get(CPUS_ENV, "").strip()
    if text:
        try:
            cpus = frozenset(int(c) for c in text.split(","))
        except ValueError:
            cpus = None
    return Threads(_count(env.get(INTRA_OP_ENV)), _count(env.get(INTER_OP_ENV)), cpus)


def pin(threads: Threads) -> None:
    """Restrict this process (and the threads it starts later) to its CPUs. Done before
    TensorFlow starts its pools, which inherit the mask; a CPU we may not use is skipped."""
    if threads.cpus is None or not hasattr(os, "sched_setaffinity"):
        return
    allowed = threads.cpus & os.sched_getaffinity(0)
    if allowed:
        os.sched_setaffinity(0, allowed)


def apply(config: object, threads: Threads) -> None:
    """Set the pool sizes on a ``tf.ConfigProto``: a server's config sizes the pools its
    graphs run on in a distributed run, where the environment variables may not be read."""
    if threads.intra_op:
        config.intra_op_parallelism_threads = threads.intra_op  # type: ignore[attr-defined]
    if threads.inter_op:
        config.inter_op_parallelism_threads = threads.inter_op  # type: ignore[attr-defined]
