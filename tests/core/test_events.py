"""Fuzzing the event parser (trainer.protocol.parse_event) and the supervisor's line
handling with hypothesis: whatever a task prints, parsing never raises, and valid events
round-trip. (Splitter-only properties live in test_lines.py.)"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trainer import protocol
from tui.core.event_records import to_json, to_record
from tui.core.events import Incident, IncidentKind, TrainerEvent
from tui.launch.lines import LineSplitter, Stream
from tui.program.base import EventReader

FAST = settings(max_examples=300, deadline=None)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (st.lists(children, max_size=5)
                      | st.dictionaries(st.text(max_size=10), children, max_size=5)),
    max_leaves=25,
)
#: Field names the events really have, so random objects often hit the typed paths.
FIELD_NAMES = sorted({f for cls in protocol.EVENT_TYPES.values() for f in cls.__dataclass_fields__}
                     | {"event", "v"})


def check(result: object) -> None:
    assert result is None or isinstance(result, protocol.Event)


@given(st.binary(max_size=400))
@FAST
def test_random_bytes_never_raise(data: bytes) -> None:
    check(protocol.parse_event(data))
    check(protocol.parse_event(data.decode("utf-8", errors="replace")))


@given(st.text(max_size=400))
@FAST
def test_random_text_never_raises(text: str) -> None:
    check(protocol.parse_event(text))
    check(protocol.parse_event("{" + text + "}"))


@given(json_values)
@FAST
def test_random_json_values_never_raise(value: Any) -> None:
    check(protocol.parse_event(json.dumps(value)))


@given(st.sampled_from(sorted(protocol.EVENT_TYPES)),
       st.one_of(st.just(protocol.SCHEMA_VERSION), json_values),
       st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), json_values, max_size=12))
@settings(max_examples=150, deadline=None)
def test_objects_of_a_valid_kind_with_random_fields_never_raise(kind: str, version: Any,
                                                              fields: dict[str, Any]) -> None:
    body = {**fields, "event": kind, "v": version}
    event = protocol.parse_event(json.dumps(body))
    check(event)
    if event is not None:
        assert isinstance(event, protocol.EVENT_TYPES[kind]) and version == protocol.SCHEMA_VERSION


@given(st.integers(min_value=0, max_value=5000), st.sampled_from(sorted(protocol.EVENT_TYPES)))
@settings(max_examples=50, deadline=None)
def test_deeply_nested_json_never_raises(depth: int, kind: str) -> None:
    nested = "[" * depth + "]" * depth
    check(protocol.parse_event(f'{{"event":"{kind}","v":1,"role":"ps","index":0,"variables":{nested}}}'))


roles = st.sampled_from(["ps", "worker"])
indexes = st.integers(min_value=0, max_value=1000)
finite = st.floats(allow_nan=False, allow_infinity=False)
times = st.floats(min_value=0, max_value=4e9, allow_nan=False)
counts = st.integers(min_value=0, max_value=2**53)

steps = st.builds(protocol.Step, role=roles, index=indexes, t=times, global_step=counts, local_step=counts,
                  loss=st.none() | finite, examples_per_sec=finite, step_time=finite, target=counts)
evals = st.builds(protocol.Eval, role=roles, index=indexes, t=times, global_step=counts, accuracy=finite,
                  loss=st.none() | finite, examples=counts)
dones = st.builds(protocol.Done, role=roles, index=indexes, t=times, reason=st.text(max_size=30),
                  global_step=counts, local_step=counts, loss=st.none() | finite,
                  accuracy=st.none() | finite)


@given(st.one_of(steps, evals, dones))
@FAST
def test_valid_events_round_trip(event: protocol.Event) -> None:
    assert protocol.parse_event(event.to_json()) == event
    assert protocol.parse_event(event.to_json().encode()) == event


@given(st.lists(st.one_of(steps, evals, dones), max_size=6), st.lists(st.binary(max_size=60), max_size=6),
       st.data())
@FAST
def test_events_between_random_bytes_survive_any_chunking(events: list[protocol.Event],
                                                          junk: list[bytes], data: st.DataObject) -> None:
    """The supervisor's path: bytes -> LineSplitter -> parse_event. Events on lines of their
    own come out exactly once, whatever junk surrounds them and however the bytes arrive."""
    stream = b""
    for number, event in enumerate(events):
        noise = junk[number % len(junk)] if junk else b""
        stream += noise.replace(b"\n", b" ") + b"\n" + event.to_json().encode() + b"\n"
    stream += b"".join(junk)
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=20)))
    splitter = LineSplitter(Stream.STDOUT, max_line=1 << 16)
    batches = []
    start = 0
    for cut in [*cuts, len(stream)]:
        batches += splitter.feed(stream[start:cut])
        start = cut
    batches += splitter.finish()
    reader = EventReader()
    found = []
    for batch in batches:
        pieces = {i for i in range(len(batch.lines)) if batch.is_piece(i)}
        read = reader.read_batch(batch.lines, "\n".join(batch.lines), 0.0, pieces)
        found += [event for index in sorted(read) for event in read[index]]
    # Junk may itself happen to be a valid event only if it was valid JSON of a known kind:
    # keep only the generated ones' order.
    assert [e for e in found if e in events] == events


any_float = st.floats() | st.none()
any_steps = st.builds(protocol.Step, role=st.text(max_size=8), index=indexes, t=st.floats(),
                      global_step=st.integers(), local_step=counts, loss=any_float,
                      examples_per_sec=st.floats(), step_time=st.floats(), target=counts,
                      accuracy=any_float, coordinator=st.booleans(),
                      by_worker=st.lists(st.integers(), max_size=4).map(tuple))
shards = st.builds(protocol.VariableShard, name=st.text(max_size=8), variable=st.text(max_size=8),
                   shard=counts, num_shards=counts, shape=st.lists(counts, max_size=3).map(tuple),
                   dtype=st.just("float32"), bytes=counts, ps=counts)
placements = st.builds(protocol.Placement, role=roles, index=indexes, t=times, model=st.text(max_size=8),
                       strategy=st.text(max_size=8), partitions=counts, num_ps=counts,
                       variables=st.lists(shards, max_size=2).map(tuple),
                       ps_bytes=st.lists(counts, max_size=3).map(tuple))
readies = st.builds(protocol.Ready, role=roles, index=indexes, t=times, pid=counts,
                    address=st.text(max_size=20))


@given(st.one_of(any_steps, evals, dones, placements, readies), st.text(max_size=12), st.floats())
@FAST
def test_a_trainer_events_record_is_the_same_text_written_directly(
        event: protocol.Event, task: str, t: float) -> None:
    """to_json writes a trainer event without to_record's walk: the same text for any event,
    NaN (null), unicode text, a nested dataclass (the long way) and all."""
    trainer_event = TrainerEvent(task=task, event=event, t=t)
    assert to_json(trainer_event) == json.dumps(to_record(trainer_event), separators=(",", ":"),
                                                allow_nan=False)


def test_an_incident_claims_a_rejoin_only_of_a_task_that_was_restarted() -> None:
    never = Incident(kind=IncidentKind.TASK_RESTART, task="worker2", reason="was killed by SIGKILL",
                     global_step=13, restarted=False)
    assert never.describe() == ("worker2 was killed by SIGKILL at step 13: not restarted (the run's "
                                "training was over first)")
    restarted = dataclasses.replace(never, restarted=True)
    assert restarted.describe().endswith(": restarted, did not rejoin")
    rejoined = dataclasses.replace(restarted, resumed_step=20)
    assert rejoined.describe().endswith(": restarted, rejoined at step 20")
