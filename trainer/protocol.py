"""The trainer -> controller event protocol, version 1. This module is the one place it is defined.

Every event is one line on the task's stdout holding one JSON object::

    {"event": "step", "v": 1, "t": 1732200000.12, "role": "worker", "index": 0, ...}

- ``event`` names the kind (the ``KIND`` of one of the classes below);
- ``v`` is :data:`SCHEMA_VERSION`; a reader ignores events of a newer major version it
  does not know rather than misreading them;
- ``t`` is the emitter's wall-clock time (``time.time()``), ``role`` is ``ps`` or
  ``worker``, ``index`` the task index within its job;
- the remaining keys are the fields of the event's dataclass. Readers ignore keys they do
  not know, so fields can be added without a version bump.

Any other stdout line is plain log text. This module imports only the standard library: the
controller imports it to parse what the trainer emits, and it never pulls TensorFlow in.

The task contract
-----------------
How the controller and a task (``python -m trainer``, or a user's script under
``python -m trainer.shim``) talk besides the events above; the constants below name each part.

- **Hold and go** (built-in trainer only): started with :data:`HOLD_FLAG`, the trainer imports
  TensorFlow, loads its data, builds its graph, emits ``loaded``, then waits for a
  :data:`GO_LINE` line on stdin before it starts its server. The controller launches every
  task at once this way and still starts the servers in order (ps, chief, others). A user's
  program is never held: it is launched in order, each task once the previous is ready.
- **Ready**: a task is up when it emits ``ready``. A user's program without the shim is up
  when TensorFlow logs ``Started server with target`` (:data:`SERVER_STARTED`) or its port
  accepts connections.
- **Ending**: the trainer's ps tasks exit 0 by themselves once every worker has finished. A
  ps under the shim ends when the controller sends it an :data:`END_LINE` line on stdin (its
  ``server.join()`` returns). Any other program's ps is stopped by the controller once the
  workers have all exited 0, and counted as succeeded. In a cluster with a ``chief`` job
  (TF2's coordinator), the chief's exit 0 ends the run: every worker, evaluator and ps still
  running is stopped at once and counted as succeeded.
- **The controller goes away**: stdin reaching EOF (or the parent process dying) makes a task
  exit :data:`EXIT_ORPHANED` at once, so no task outlives its controller.
- **Exit codes**: :data:`EXIT_OK` done, :data:`EXIT_FAILED` an error (an ``error`` event
  says which), :data:`EXIT_USAGE` a bad setting, :data:`EXIT_ORPHANED` the controller went away.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

SCHEMA_VERSION = 1

#: The task contract (see the module docstring).
HOLD_FLAG = "--hold"
GO_LINE = "go"
END_LINE = "end"
#: Written by the controller before it stops a task on purpose (its stdin then closes and a
#: SIGTERM follows): the task's exit is then not "the controller went away".
STOP_LINE = "stop"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ORPHANED = 143  # as if SIGTERM: the controller went away
#: What TensorFlow logs once a gRPC server listens (``... Started server with target: grpc://...``).
SERVER_STARTED = "Started server with target"

#: Exit reasons carried by :class:`Done`.
REASON_TARGET_REACHED = "target_reached"
REASON_ALREADY_COMPLETE = "already_complete"
REASON_CLUSTER_DONE = "cluster_done"
#: A user's program run by ``trainer.shim`` returned from its main normally.
REASON_PROGRAM_ENDED = "program_ended"
#: A server of a user's program ended in ``server.join()`` by the controller's ``end``: by
#: hand that call never returns, so what the program does after it never runs here either.
REASON_ENDED_IN_JOIN = "ended_in_join"

#: Actions carried by :class:`Checkpoint`.
CHECKPOINT_SAVED = "saved"
CHECKPOINT_RESTORED = "restored"
CHECKPOINT_FRESH = "fresh"

#: Set (to "1") by the controller in a task's environment when the controller holds the
#: task's port itself until it sends the task ``go`` (trainer.portclaim).
PORT_HELD_ENV = "TFDIST_PORT_HELD"


@dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every event carries."""

    KIND: ClassVar[str] = ""
    role: str
    index: int
    t: float = field(default_factory=time.time)

    @property
    def task(self) -> str:
        """The task's display name, e.g. ``worker1``."""
        return f"{self.role}{self.index}"

    def to_json(self) -> str:
        """Serialise to one JSON line (without the newline)."""
        return json.dumps(self.record(), separators=(",", ":"), allow_nan=False)

    def record(self) -> dict[str, Any]:
        """The JSON-ready dict :meth:`to_json` writes (built directly: ``asdict`` deep-copies
        every value, and the controller records every event it gets)."""
        body: dict[str, Any] = {"event": self.KIND, "v": SCHEMA_VERSION}
        body.update(_plain(self))
        return body


@dataclass(frozen=True, kw_only=True)
class Loaded(Event):
    """Started with ``--hold``: TensorFlow is imported, data loaded and the graph built; the
    task now waits for a ``go`` line on stdin before it starts its server. A controller
    launches every task at once this way and still starts the servers in order."""

    KIND: ClassVar[str] = "loaded"
    pid: int
    seconds: float


@dataclass(frozen=True, kw_only=True)
class Ready(Event):
    """The task's gRPC server listens on ``address``."""

    KIND: ClassVar[str] = "ready"
    pid: int
    address: str
    tf_version: str = ""


@dataclass(frozen=True, kw_only=True)
class Initialized(Event):
    """A worker's session is usable: the chief initialised or restored the model, another
    worker saw it ready. ``seconds`` counts from process start."""

    KIND: ClassVar[str] = "initialized"
    global_step: int
    seconds: float
    is_chief: bool = False
    #: TF2's coordinator (``ClusterCoordinator``): its steps are the whole cluster's.
    coordinator: bool = False


@dataclass(frozen=True, kw_only=True)
class VariableShard:
    """One variable, or one shard of a partitioned variable, and the ps that holds it."""

    name: str
    variable: str
    shard: int
    num_shards: int
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    ps: int
    trainable: bool = True


@dataclass(frozen=True, kw_only=True)
class Placement(Event):
    """Where every variable (shard) lives. Emitted by the chief and by ``trainer plan``."""

    KIND: ClassVar[str] = "placement"
    model: str
    strategy: str
    partitions: int
    num_ps: int
    variables: tuple[VariableShard, ...]
    ps_bytes: tuple[int, ...]
    #: What is on a ps but cannot be counted in bytes (a user program's SyncReplicas
    #: accumulators and token queues), or a variable on no ps, said plainly, one per item.
    unattributed: tuple[str, ...] = ()

    @property
    def max_mean_ratio(self) -> float:
        """Max over mean bytes per ps: 1.0 is perfect balance, ``num_ps`` is everything on one."""
        if not self.ps_bytes or sum(self.ps_bytes) == 0:
            return 1.0
        return max(self.ps_bytes) / (sum(self.ps_bytes) / len(self.ps_bytes))


@dataclass(frozen=True, kw_only=True)
class Step(Event):
    """Training progress of one worker. ``examples_per_sec`` and ``step_time`` are averages
    over the steps since the previous ``step`` event of this worker."""

    KIND: ClassVar[str] = "step"
    global_step: int
    local_step: int
    loss: float | None
    examples_per_sec: float
    step_time: float
    target: int = 0
    #: Training accuracy: reported by a user program through ``tfdist_report.step(accuracy=...)``
    #: or read from its Keras progress lines (held-out accuracy is an :class:`Eval`).
    accuracy: float | None = None
    #: The counts are the whole cluster's, not this task's (TF2's coordinator): its examples/sec
    #: is the cluster's, never divided among the workers again.
    coordinator: bool = False
    #: A coordinator's functions finished so far by each worker (index = worker task index),
    #: so that the cluster's rate can be split among the workers that did the work.
    by_worker: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Eval(Event):
    """Held-out accuracy and loss (the built-in trainer's chief, an evaluator task, a
    ``Model.evaluate`` after ``fit``: None for a figure it did not print). ``global_step`` 0
    from a task that does not know the step (log lines): the run's step then."""

    KIND: ClassVar[str] = "eval"
    global_step: int
    accuracy: float | None
    loss: float | None
    examples: int


@dataclass(frozen=True, kw_only=True)
class Checkpoint(Event):
    """A checkpoint was saved or restored, or a restore was impossible and training starts
    fresh (``action`` = ``fresh``, ``reason`` says why)."""

    KIND: ClassVar[str] = "checkpoint"
    action: str
    global_step: int
    path: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Done(Event):
    """The task finished its work and is about to exit 0."""

    KIND: ClassVar[str] = "done"
    reason: str
    global_step: int = 0
    local_step: int = 0
    loss: float | None = None
    accuracy: float | None = None


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    """The task is about to exit non-zero. ``type`` is the exception class name (or
    ``usage`` for a bad setting)."""

    KIND: ClassVar[str] = "error"
    type: str
    message: str


@dataclass(frozen=True, kw_only=True)
class AnatomyPart:
    """One part of a sampled step: ``compute``, ``input``, ``read`` (variables from ps
    ``ps``), ``push`` (gradients to ps ``ps`` and their apply there), ``wait`` (sync: for
    the other replicas) or ``rest``; its seconds and its share of the step."""

    part: str
    seconds: float
    share: float
    ps: int | None = None


@dataclass(frozen=True, kw_only=True)
class StepAnatomy(Event):
    """Where one sampled training step of a worker went, from TensorFlow's own step
    statistics of that step (a full trace, one step in ``every``). The parts add up to the
    step: where several overlap, the time goes to the first of compute, input, wait, reads,
    pushes (split evenly among the ps read or pushed at once), and what none covers is the
    rest (the session's own work, Python, gRPC outside any op). ``cost``: the traced steps'
    extra time over all steps' time so far, what the sampling costs the throughput."""

    KIND: ClassVar[str] = "step_anatomy"
    global_step: int
    local_step: int
    seconds: float
    parts: tuple[AnatomyPart, ...]
    every: int
    cost: float = 0.0
    #: A TF2 coordinator's functions as it sees them (it has no step statistics of its
    #: workers): means over the ``every`` functions finished since its last such event, each
    #: from its schedule to its result, in two parts, ``queued`` (waiting for a free worker)
    #: and ``function`` (on a worker: its compute and transfers in there, unseen);
    #: ``local_step`` counts the functions finished, ``global_step`` the batches.
    coordinator: bool = False
    #: A coordinator's mean ``function`` seconds on each worker (index = worker task index;
    #: null for a worker that finished none since the last event).
    by_worker: tuple[float | None, ...] = ()
    #: A coordinator's functions put back to run again since its last such event (a worker
    #: failed under them).
    retried: int = 0

    def seconds_of(self, part: str) -> float:
        """Seconds of every part so named (reads or pushes: summed over the ps)."""
        return sum(p.seconds for p in self.parts if p.part == part)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.KIND: cls for cls in (Loaded, Ready, Initialized, Placement, Step, Eval, Checkpoint, Done,
                              Error, StepAnatomy)
}

AnyEvent = Union[Loaded, Ready, Initialized, Placement, Step, Eval, Checkpoint, Done, Error,
                 StepAnatomy]


class _Invalid(Exception):
    pass


def parse_event(line: str | bytes) -> Event | None:
    """Parse one line of task output. Returns None for anything that is not a well-formed
    event of a known kind and version: the caller keeps such lines as plain text.
    Never raises."""
    try:
        if isinstance(line, bytes):
            line = line.decode("utf-8")
        text = line.strip()
        if not (text.startswith("{") and text.endswith("}")):
            return None
        body = json.loads(text)
        if not isinstance(body, dict):
            return None
        kind = body.get("event")
        version = body.get("v")
        if not isinstance(kind, str) or kind not in EVENT_TYPES:
            return None
        if not isinstance(version, int) or isinstance(version, bool) or version != SCHEMA_VERSION:
            return None
        return _build(EVENT_TYPES[kind], body)
    except (_Invalid, ValueError, TypeError, RecursionError, UnicodeDecodeError):
        return None


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    """A dataclass's resolved field types, once per class: ``typing.get_type_hints`` costs
    hundreds of microseconds on a loaded machine, and every line of every task's output
    may be an event."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _build(cls: type[Any], body: Mapping[str, Any]) -> Any:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in body:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _Invalid(f"missing {f.name}")
            continue
        kwargs[f.name] = _coerce(hints[f.name], body[f.name])
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _coerce(option, value)
            except _Invalid:
                continue
        raise _Invalid(f"{value!r} matches no option of {hint}")
    if hint is type(None):
        if value is None:
            return None
        raise _Invalid("expected null")
    if origin is tuple:
        if not isinstance(value, list):
            raise _Invalid("expected a list")
        (item,) = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return tuple(_coerce(item, v) for v in value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise _Invalid("expected an object")
        return _build(hint, value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Invalid("expected a boolean")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Invalid("expected an integer")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        raise _Invalid("expected a finite number")
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Invalid("expected a string")
    raise _Invalid(f"unsupported field type {hint}")


#: Types written as they are.
_SCALARS = frozenset({int, str, bool, type(None)})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _plain(value: Any) -> Any:
    """Dataclasses become dicts, tuples lists; non-finite floats become None (JSON has no
    NaN)."""
    kind = type(value)
    if kind in _SCALARS:  # most values: first, with one look-up
        return value
    if kind is float:
        return value if math.isfinite(value) else None  # JSON has no NaN or infinity
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
