"""The controller's events as records: a JSON-ready dict (:func:`to_record`) or one JSON line
(:func:`to_json`), the one format shared by ``events.jsonl`` and ``--json``; a trainer's step,
nearly every line a busy run writes, is written directly rather than through the dict."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from trainer import protocol
from tui.core.events import (
    ControllerEvent,
    HostsProgress,
    Notice,
    ProgressUpdate,
    RunFinished,
    RunStarted,
    RunSummary,
    TaskHint,
    TaskHintCleared,
    TaskOutput,
    TaskStalled,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.host_state import HostReach

_RECORD_TYPES: dict[type[Any], str] = {
    RunStarted: "run_started",
    TaskStateChanged: "task_state",
    TaskOutput: "task_output",
    TrainerEvent: "trainer_event",
    ProgressUpdate: "progress",
    Notice: "notice",
    TaskStalled: "task_stalled",
    TaskHint: "task_hint",
    TaskHintCleared: "task_hint_cleared",
    RunFinished: "run_finished",
    HostsProgress: "hosts",
    HostReach: "host_reach",
}


def to_record(event: ControllerEvent) -> dict[str, Any]:
    """A JSON-ready dict: ``{"type": "task_state", ...fields}``. A protocol event nested in a
    :class:`TrainerEvent` appears exactly as the trainer emitted it."""
    body = _plain(event)
    assert isinstance(body, dict)
    return {"type": _RECORD_TYPES[type(event)], **body}


#: One encoder for every record (json.dumps with options makes a new one per call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def to_json(event: ControllerEvent) -> str:
    """One JSON line (without the newline) for ``events.jsonl`` and ``--json``."""
    global _last_json
    last, text = _last_json  # (one pair, read and replaced whole: safe across threads)
    if event is last:
        # The run directory and ``--json`` write each event in turn: every step line of
        # every task was written twice.
        return text
    text = _to_json(event)
    _last_json = (event, text)
    return text


#: The last event :func:`to_json` wrote, and its text (events are frozen).
_last_json: tuple[object, str] = (None, "")


def _to_json(event: ControllerEvent) -> str:
    if type(event) is TrainerEvent:
        # Every step line of every task is one: written directly, without to_record's dict
        # and the encoder's walk over it (three quarters of its cost), for the same text.
        try:
            task, t = event.task, event.t  # (a str and a finite float, but for a test's)
            task_json = _ASCII(task) if type(task) is str else _json(task)
            t_json = float.__repr__(t) if type(t) is float and t - t == 0 else _json(t)
            inner = _event_json(event.event)
            return f'{{"type":"trainer_event","task":{task_json},"event":{inner},"t":{t_json}}}'
        except _NotPlain:
            pass  # a value to_record changes, such as a nested dataclass: the long way
    return _ENCODER.encode(to_record(event))


#: How the encoder writes a string (ensure_ascii, its default).
_ASCII = json.encoder.encode_basestring_ascii


class _NotPlain(Exception):
    """A value :func:`_json` does not write."""


def _json(value: Any) -> str:
    """A scalar (or a tuple of ints) as :data:`_ENCODER` writes what :func:`to_record`
    makes of it: a non-finite float as null."""
    kind = type(value)
    if kind is str:
        return _ASCII(value)
    if kind is float:
        return float.__repr__(value) if math.isfinite(value) else "null"
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is tuple and all(type(item) is int for item in value):
        return f"[{','.join(map(int.__repr__, value))}]"
    raise _NotPlain


@functools.cache
def _event_writer(cls: Any) -> Callable[[Any], str]:
    """A function that writes a protocol event class's record as :data:`_ENCODER` would, made
    once per class: its fields read, each written by its type, and the text joined in one
    f-string (a step line's record was a list of field texts, a map and a join)."""
    names = _field_names(cls)
    if cls.record is not protocol.Event.record or {"event", "v"} & set(names):
        raise _NotPlain  # (a record of its own)
    spaces: dict[str, Any] = {"W": _WRITERS, "J": _json, "R": float.__repr__,
                              "H": f'{{"event":{_ASCII(cls.KIND)},"v":{protocol.SCHEMA_VERSION}'}
    body = ["def write(e):"]
    for i, name in enumerate(names):
        spaces[f"K{i}"] = f",{_ASCII(name)}:"
        # A float first (most values; a non-finite one is null), else by the value's type.
        body += [f"    v = e.{name}",
                 f"    s{i} = (R(v) if v - v == 0 else 'null') if type(v) is float else W.get(type(v), J)(v)"]
    fields = "".join(f"{{K{i}}}{{s{i}}}" for i in range(len(names)))
    body.append('    return f"{H}' + fields + '}}"')
    exec("\n".join(body), spaces)  # (code made here from a dataclass's field names only)
    writer: Callable[[Any], str] = spaces["write"]
    return writer


#: How the encoder writes a value of each common type, as built-in functions (no Python
#: call a value); a float is written by :func:`_event_writer` itself (a non-finite one is null).
_WRITERS: dict[type, Callable[[Any], str]] = {
    str: _ASCII, int: int.__repr__,
    bool: {True: "true", False: "false"}.__getitem__, type(None): {None: "null"}.__getitem__,
    tuple: lambda value: "[]" if not value else _json(value)}  # (a step's by_worker: nearly always empty)


def _event_json(event: protocol.Event) -> str:
    """``event.record()`` as JSON, written directly (:class:`_NotPlain` if it cannot be)."""
    kind: Any = type(event)
    return _event_writer(kind)(event)


def summary_record(summary: RunSummary) -> dict[str, Any]:
    """The summary as a JSON-ready dict: ``summary.json``, and the ``summary`` of a
    ``run_finished`` record."""
    body = _plain(summary)
    assert isinstance(body, dict)
    return body


#: Types written as they are.
_SCALARS = frozenset({int, str, bool, type(None)})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:  # most values: first, with one look-up
        return value
    if kind is float:
        return value if math.isfinite(value) else None  # JSON has no NaN or infinity
    if isinstance(value, protocol.Event):
        return value.record()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN or infinity
        return None
    return value
