"""A TF1 program's own training steps under the shim: which ``Session.run`` calls are steps,
how many this task ran, and one in N of them traced for its step anatomy, as the built-in
trainer does (:mod:`trainer.anatomy`).

A step is a ``Session.run`` whose fetches hold a train op: what an optimizer's
``apply_gradients`` (``minimize``, ``SyncReplicasOptimizer``'s included) returned in this
process, or a ``tf.group`` of one. The hook sits on TensorFlow's ``BaseSession.run``, under
``MonitoredSession`` and ``Supervisor`` alike, so each of the program's steps is counted
once, whatever wraps its session; the shim's own reads of the global step are not steps.

A traced step runs with ``RunOptions(trace_level=FULL_TRACE)`` (the program's own options
and ``RunMetadata`` kept, the trace level raised) and its step statistics become a
``step_anatomy`` event: its global step is the last one the shim read (up to a second old:
the step's own value is in the program's fetches, not ours)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

from trainer import lifecycle
from trainer.anatomy import Sampler, anatomy
from trainer.shim.state import STATE, soft

_TRAINING_ROLES = ("worker", "chief")
#: How deep a fetch structure is searched for a train op (MonitoredSession nests the
#: program's fetches one level inside its hooks' dict).
_DEPTH = 6


class _Steps:
    """The train ops this process built and the steps it ran with them."""

    lock = threading.Lock()
    train_ops: set[Any] = set()
    sync = False
    count = 0
    sampler = Sampler()


def install() -> None:
    """Patch the optimizers (to learn the train ops) and the session (to count and sample)."""
    from tensorflow.python.client import session
    from tensorflow.python.training import optimizer, sync_replicas_optimizer

    soft("the train-op hook", lambda: _patch_apply(optimizer.Optimizer, sync=False))
    soft("the train-op hook",
         lambda: _patch_apply(sync_replicas_optimizer.SyncReplicasOptimizer, sync=True))
    soft("the step hook", lambda: _patch_run(session.BaseSession))


def own_steps() -> int | None:
    """The training steps this task ran itself, or None while it has built no train op (a
    program whose optimizer the shim does not know)."""
    with _Steps.lock:
        return _Steps.count if _Steps.train_ops else None


def _patch_apply(optimizer: Any, sync: bool) -> None:
    original = optimizer.apply_gradients

    @functools.wraps(original)
    def apply_gradients(self: Any, *args: Any, **kwargs: Any) -> Any:
        train_op = original(self, *args, **kwargs)
        soft("the train-op hook", lambda: _learn(train_op, sync))
        return train_op

    optimizer.apply_gradients = apply_gradients


def _learn(train_op: Any, sync: bool) -> None:
    op = getattr(train_op, "op", train_op)
    with _Steps.lock:
        _Steps.train_ops.add(op)
        _Steps.sync = _Steps.sync or sync


def _patch_run(session: Any) -> None:
    original = session.run

    @functools.wraps(original)
    def run(self: Any, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        traced = soft("the step hook", lambda: _starting(fetches))
        if traced is None:
            return original(self, fetches, feed_dict, options, run_metadata)
        if traced:
            options, run_metadata = _traced(options, run_metadata)
        began = time.time()
        result = original(self, fetches, feed_dict, options, run_metadata)
        ended = time.time()
        soft("the step hook", lambda: _ran(began, ended, run_metadata if traced else None))
        return result

    session.run = run


def _starting(fetches: Any) -> bool | None:
    """None when this run is not a training step; else whether it is to be traced."""
    if STATE.role not in _TRAINING_ROLES:
        return None
    with _Steps.lock:
        train_ops = _Steps.train_ops
        if not train_ops or not any(_trains(op, train_ops) for op in _ops(fetches, _DEPTH)):
            return None
        return _Steps.sampler.due(_Steps.count + 1)


def _trains(op: Any, train_ops: set[Any]) -> bool:
    if op in train_ops:
        return True
    return getattr(op, "type", "") == "NoOp" and any(c in train_ops for c in op.control_inputs)


def _ops(fetches: Any, depth: int) -> Iterator[Any]:
    """The graph operations fetched (a tensor's or variable's op), through lists, tuples and
    dicts (whose keys may be anything: MonitoredSession keys its hooks' fetches by hook)."""
    if depth <= 0 or fetches is None or isinstance(fetches, (str, bytes)):
        return
    if isinstance(fetches, dict):
        for value in fetches.values():
            yield from _ops(value, depth - 1)
    elif isinstance(fetches, (list, tuple)):
        for value in fetches:
            yield from _ops(value, depth - 1)
    else:
        op = getattr(fetches, "op", fetches)
        if hasattr(op, "control_inputs"):
            yield op


def _traced(options: Any, run_metadata: Any) -> tuple[Any, Any]:
    """The program's options with a full trace, and somewhere for the step statistics."""
    from tensorflow.core.protobuf import config_pb2

    traced = config_pb2.RunOptions()
    if options is not None:
        traced.CopyFrom(options)
    traced.trace_level = max(int(traced.trace_level), config_pb2.RunOptions.FULL_TRACE)
    return traced, run_metadata if run_metadata is not None else config_pb2.RunMetadata()


def _ran(began: float, ended: float, metadata: Any) -> None:
    """A training step ran from ``began`` to ``ended``; traced, its anatomy is emitted."""
    with _Steps.lock:
        _Steps.count += 1
        local_step = _Steps.count
        _Steps.sampler.ran(local_step, ended - began, traced=metadata is not None)
        sync = _Steps.sync
    if metadata is not None:
        lifecycle.emit(anatomy(metadata, worker=STATE.index, num_ps=STATE.num_ps, sync=sync,
                               start=began, end=ended, global_step=STATE.global_step,
                               local_step=local_step, sampler=_Steps.sampler, role=STATE.role))
