"""A protocol event's record (what the run directory writes for it) is what its JSON line
says, built without ``dataclasses.asdict``'s deep copy (issue 35)."""

from __future__ import annotations

import dataclasses
import json
import math

from trainer import protocol
from tui.core.event_records import to_record
from tui.core.events import TrainerEvent

EVENTS = [
    protocol.Step(role="worker", index=3, t=1.5, global_step=7, local_step=2, loss=math.nan,
                  examples_per_sec=12.5, step_time=0.1, target=100, accuracy=0.5),
    protocol.Placement(role="worker", index=0, t=2.0, model="cnn", strategy="greedy", partitions=2,
                       num_ps=2, ps_bytes=(10, 20), unattributed=("q",),
                       variables=(protocol.VariableShard(name="w/part_0", variable="w", shard=0,
                                                         num_shards=2, shape=(3, 4), dtype="float32",
                                                         bytes=48, ps=1),)),
    protocol.Done(role="worker", index=1, t=3.0, reason="target_reached", global_step=9, loss=None,
                  accuracy=math.inf),
]


def old_record(event: protocol.Event) -> dict[str, object]:
    """How the record was made before: asdict, non-finite floats to None, a JSON round trip."""
    def plain(value: object) -> object:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return None if isinstance(value, float) and not math.isfinite(value) else value
    body = {"event": event.KIND, "v": protocol.SCHEMA_VERSION}
    body.update(plain(dataclasses.asdict(event)))  # type: ignore[arg-type]
    return json.loads(json.dumps(body))  # type: ignore[no-any-return]


def test_records_are_what_the_json_line_says() -> None:
    for event in EVENTS:
        assert event.record() == old_record(event) == json.loads(event.to_json())
        assert protocol.parse_event(event.to_json()) is not None
        assert to_record(TrainerEvent(task=event.task, event=event, t=4.0))["event"] == old_record(event)
