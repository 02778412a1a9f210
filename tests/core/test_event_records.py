""":mod:`tui.core.event_records`: each event written once, a step without the dict's walk."""

from __future__ import annotations

import json

import pytest

from trainer import protocol
from tui.core import event_records
from tui.core.event_records import to_json, to_record
from tui.core.events import ControllerEvent, TrainerEvent


def test_a_step_is_recorded_without_to_record(monkeypatch: pytest.MonkeyPatch) -> None:
    step = protocol.Step(role="worker", index=3, t=1.5, global_step=7, local_step=7, loss=float("nan"),
                         examples_per_sec=2.0, step_time=0.5, by_worker=(1, 2))
    expected = to_json_the_long_way(TrainerEvent(task="worker3", event=step, t=2.0))
    monkeypatch.setattr(event_records, "to_record", None)  # the per-step path must not need it
    assert to_json(TrainerEvent(task="worker3", event=step, t=2.0)) == expected
    assert '"loss":null' in expected and '"by_worker":[1,2]' in expected


def test_an_event_written_by_two_sinks_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The run directory and --json write every event in turn; each step line was encoded twice.
    first, second = (TrainerEvent(task=f"worker{i}", t=float(i), event=protocol.Step(
        role="worker", index=i, global_step=i, local_step=i, loss=0.5, examples_per_sec=1.0, step_time=0.1))
        for i in (1, 2))
    encoded: list[object] = []
    real = event_records._to_json

    def counted(event: ControllerEvent) -> str:
        encoded.append(event)
        return real(event)

    monkeypatch.setattr(event_records, "_to_json", counted)
    texts = [to_json(first), to_json(first), to_json(second), to_json(second), to_json(first)]
    assert encoded == [first, second, first]
    assert texts == [to_json_the_long_way(e) for e in (first, first, second, second, first)]


def to_json_the_long_way(event: TrainerEvent) -> str:
    return json.dumps(to_record(event), separators=(",", ":"), allow_nan=False)
