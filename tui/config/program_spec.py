"""The ``program:`` section of hosts.yaml, validated (see :mod:`tui.config.program`)."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path


class MetricField(str, Enum):
    """The named groups a ``metrics:`` pattern may capture."""

    STEP = "step"
    LOSS = "loss"
    ACCURACY = "accuracy"
    EXAMPLES_PER_SEC = "examples_per_sec"


class Placeholder(str, Enum):
    """What a command may name in braces besides the ``training:`` keys."""

    JOB = "job"
    INDEX = "index"
    PS_HOSTS = "ps_hosts"
    WORKER_HOSTS = "worker_hosts"
    CHIEF_HOSTS = "chief_hosts"
    ADDRESS = "address"
    MODE = "mode"
    SYNC = "sync"
    PARTITIONS = "partitions"
    FUSE = "fuse"
    STEPS = "steps"
    RUN_DIR = "run_dir"
    CHECKPOINT_DIR = "checkpoint_dir"
    SUMMARY_DIR = "summary_dir"


#: The placeholders the app's mode toggle (``m``) drives, and the partitions toggle (``+``/``-``).
MODE_PLACEHOLDERS = frozenset({Placeholder.MODE.value, Placeholder.SYNC.value})
PARTITION_PLACEHOLDERS = frozenset({Placeholder.PARTITIONS.value})
#: The placeholder the app's fuse toggle (``u``) drives: ``true`` or ``false``.
FUSE_PLACEHOLDERS = frozenset({Placeholder.FUSE.value})


@dataclass(frozen=True)
class MetricPattern:
    """One ``metrics:`` entry: a regular expression with named groups (:class:`MetricField`)."""

    regex: re.Pattern[str]

    @property
    def fields(self) -> frozenset[MetricField]:
        return frozenset(MetricField(name) for name in self.regex.groupindex)


@dataclass(frozen=True)
class ProgramSpec:
    """The user's own program: the command every task runs, with placeholders unrendered."""

    #: The command's arguments as written (after shlex splitting), e.g. ``--job_name={job}``.
    command: tuple[str, ...]
    #: The folder of hosts.yaml: local tasks run there; ``upload`` is relative to it.
    base_dir: Path
    #: A folder (absolute) copied to each remote host; remote tasks run in the copy.
    upload: Path | None = None
    #: Examples per step, to turn a step rate into examples/sec.
    batch_size: int | None = None
    metrics: tuple[MetricPattern, ...] = ()
    #: Run a Python script under ``python -m trainer.shim`` (``shim: false`` turns it off).
    shim: bool = True
    #: ``training:`` values other than the settings the controller drives, as written.
    values: Mapping[str, str] = field(default_factory=dict)
    #: Variables the command assigns before its program (``TF_USE_LEGACY_KERAS=1 python
    #: train.py``, as a shell takes them), values with placeholders unrendered: each task's
    #: environment gets them.
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def placeholders(self) -> frozenset[str]:
        """The names the command (its variables' values included) uses in braces."""
        return frozenset(name for arg in (*self.command, *self.env.values())
                         for name in placeholder_names(arg))

    @property
    def written(self) -> str:
        """The command as written, its variable assignments first."""
        return " ".join((*(f"{name}={value}" for name, value in self.env.items()), *self.command))

    def uses_any(self, names: frozenset[str]) -> bool:
        """Whether the command names any of ``names`` (TF_CONFIG carries no training values,
        so a toggle whose placeholders are unused changes nothing the program sees)."""
        return bool(self.placeholders & names)


def placeholder_names(text: str) -> Iterator[str]:
    """The ``{name}`` fields of ``text`` (``{{`` is a literal brace). Raises ValueError for
    unbalanced braces."""
    for _, name, _, _ in string.Formatter().parse(text):
        if name is not None:
            yield name
