"""What the shim reports from the program's graph and session: ``placement`` once per
worker/chief, ``initialized`` per session, and ``step`` about once a second from a daemon
thread that reads the global step beside the program's own session."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from typing import Any

from trainer import lifecycle, protocol
from trainer import placement as placement_mod
from trainer.shim import steps
from trainer.shim.state import STATE, seconds_since_start, soft

#: Seconds between two reads of the global step.
STEP_INTERVAL = 1.0
#: How often the reader looks (a short run may be over within the first interval: its first
#: step is reported at once, later ones at most every STEP_INTERVAL).
POLL_INTERVAL = 0.25
#: A read that takes longer (a ps gone) is abandoned and tried again later.
READ_TIMEOUT_MS = 5000
#: Ops that hold state on a ps but are not variables, so their bytes are unknown.
_STATEFUL_NON_VARIABLES = frozenset({
    "ConditionalAccumulator", "SparseConditionalAccumulator", "ResourceConditionalAccumulator",
    "FIFOQueue", "FIFOQueueV2", "PaddingFIFOQueueV2", "RandomShuffleQueueV2", "PriorityQueueV2",
    "HashTableV2", "MutableHashTableV2", "MutableHashTableOfTensorsV2", "MutableDenseHashTableV2",
})
_CHIEF_ROLES = ("worker", "chief")


def _tf1() -> Any:
    import tensorflow as tf

    return tf.compat.v1


def on_graph(graph: Any) -> None:
    """A graph was finalized: describe its placement (worker or chief, once)."""
    if STATE.placement_sent or STATE.role not in _CHIEF_ROLES:
        return
    event = placement(graph)
    if event is not None:
        STATE.placement_sent = True
        lifecycle.emit(event)


def placement(graph: Any) -> protocol.Placement | None:
    """The placement of ``graph``'s global variables, or None when it has none."""
    tf = _tf1()
    with graph.as_default():
        variables = tf.global_variables()
        if not variables:
            return None
        indices = [placement_mod.ps_index(v.device) for v in variables]
        unattributed = [f"{v.op.name}: on {v.device or 'no device'}, not on a ps"
                        for v, ps in zip(variables, indices, strict=True) if ps is None]
        for op in graph.get_operations():
            ps = placement_mod.ps_index(op.device)
            if ps is not None and op.type in _STATEFUL_NON_VARIABLES:
                indices.append(ps)
                unattributed.append(f"{op.name} ({op.type}) on ps{ps}: size not known")
        num_ps = max([STATE.num_ps, *[i + 1 for i in indices if i is not None]])
        report = placement_mod.report(tf, model=STATE.program, strategy="program", partitions=1,
                                      num_ps=num_ps, role=STATE.role, index=STATE.index)
    partitions = max((v.num_shards for v in report.variables), default=1)
    return dataclasses.replace(report, partitions=partitions, unattributed=tuple(unattributed))


def on_session(graph: Any, session: Any, is_chief: bool) -> None:
    """A ``SessionManager`` handed the program a usable session."""
    if STATE.role not in _CHIEF_ROLES:
        return
    if not STATE.placement_sent:
        soft("the placement hook", lambda: on_graph(graph))
    tf = _tf1()
    global_step = tf.train.get_global_step(graph)
    step = int(session.run(global_step)) if global_step is not None else 0
    STATE.global_step = step
    lifecycle.emit(protocol.Initialized(role=STATE.role, index=STATE.index, global_step=step,
                                        seconds=seconds_since_start(), is_chief=is_chief))
    if global_step is not None:
        _Reader.follow(session, global_step, step)
        _read_at_close(session, global_step)


def _read_at_close(session: Any, global_step: Any) -> None:
    """Wrap this session's ``close`` (an attribute of the instance only) to read the global
    step once more: the last ``step`` event then carries the final step."""
    original = session.close

    def close() -> None:
        soft("the final step read", lambda: _Reader.read_now(session, global_step, final=True))
        _Reader.forget(session)
        original()

    session.close = close


class _Reader:
    """The one thread reading the global step; a new session replaces the old one."""

    _lock = threading.Lock()
    _emit_lock = threading.Lock()
    _target: tuple[Any, Any, int] | None = None
    _thread: threading.Thread | None = None
    _first = 0
    _last_step = -1
    _last_time = 0.0
    _last_own = 0
    _emitted = False

    @classmethod
    def follow(cls, session: Any, global_step: Any, first: int) -> None:
        with cls._lock:
            cls._target = (session, global_step, first)
            with cls._emit_lock:
                cls._first, cls._last_step, cls._last_time = first, first, time.monotonic()
                cls._last_own = steps.own_steps() or 0
                cls._emitted = False
            if cls._thread is None:
                cls._thread = threading.Thread(target=cls._run, name="tfdist-shim-steps",
                                               daemon=True)
                cls._thread.start()

    @classmethod
    def forget(cls, session: Any) -> None:
        """The program closes ``session``: stop reading from it."""
        with cls._lock:
            if cls._target is not None and cls._target[0] is session:
                cls._target = None

    @classmethod
    def _run(cls) -> None:
        while True:
            time.sleep(POLL_INTERVAL)
            with cls._lock:
                target = cls._target
            if target is None:
                continue
            session, global_step, _ = target
            try:
                cls.read_now(session, global_step)
            except RuntimeError:  # the program closed its session
                with cls._lock:
                    if cls._target is target:
                        cls._target = None
            except Exception:  # a ps away for a moment: try again next time
                continue

    @classmethod
    def read_now(cls, session: Any, global_step: Any, final: bool = False) -> None:
        """Read the global step from ``session``; emit ``step`` when it moved (the first move
        at once, then at most every :data:`STEP_INTERVAL` unless ``final``)."""
        options = _tf1().RunOptions(timeout_in_ms=READ_TIMEOUT_MS)
        step = int(session.run(global_step, options=options))
        with cls._emit_lock:
            now = time.monotonic()
            STATE.global_step = step
            if step == cls._last_step or _reported_recently():
                return
            if cls._emitted and not final and now - cls._last_time < STEP_INTERVAL:
                return
            # This task's own steps when the shim knows its train op (another worker's
            # steps move the global step too); else the global step's moves.
            own = steps.own_steps()
            if own is not None:
                local_step, moved = own, max(own - cls._last_own, 1)
            else:
                local_step, moved = step - cls._first, max(step - cls._last_step, 1)
            lifecycle.emit(protocol.Step(
                role=STATE.role, index=STATE.index, global_step=step, local_step=local_step,
                loss=None, examples_per_sec=0.0,
                step_time=round((now - cls._last_time) / moved, 6)))
            cls._last_step, cls._last_time, cls._emitted = step, now, True
            cls._last_own = own or 0


def read_final() -> None:
    """One last read before ``done``, when the program left its session open."""
    with _Reader._lock:
        target = _Reader._target
    if target is not None:
        try:
            _Reader.read_now(target[0], target[1], final=True)
        except RuntimeError:  # closed since: the last read stands
            pass


def _reported_recently() -> bool:
    """The program reports its own steps through ``tfdist_report``: do not double them."""
    report = sys.modules.get("tfdist_report")
    last = getattr(report, "last_step_report", 0.0) if report is not None else 0.0
    return isinstance(last, float) and time.monotonic() - last < 2 * STEP_INTERVAL
