"""``--json``'s lines: every controller event as one JSON record, the way CI reads a run
(the headless front end writes them in place of its text)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TextIO

from tui.core.event_records import to_json, to_record
from tui.core.events import ControllerEvent, ProgressUpdate, RunFinished, TaskOutput
from tui.core.traffic import TrafficMonitor, TrafficUpdate


class JsonPrinter:
    """``--json``: every controller event as one JSON line (protocol event lines appear
    once, as ``trainer_event`` records, not again as output). With a traffic monitor, each
    of its samples is a ``traffic`` record, and ``run_finished`` carries the run's traffic
    (``traffic.json``'s content: the monitor handles the event before this printer)."""

    def __init__(self, out: TextIO, traffic: TrafficMonitor | None = None) -> None:
        self._out = out
        self._traffic: TrafficMonitor | None = None
        if traffic is not None:
            self.follow(traffic)

    def follow(self, traffic: TrafficMonitor) -> None:
        """Write the samples of ``traffic`` (the session's, once it is made)."""
        self._traffic = traffic
        traffic.subscribe(self.traffic_update)

    def handle(self, event: ControllerEvent) -> None:
        if isinstance(event, ProgressUpdate):
            return  # (derived from the trainer events, printed already)
        if isinstance(event, TaskOutput):
            self._out.write("".join(json.dumps(record, separators=(",", ":")) + "\n"
                                    for record in event.records() if not record["is_event"]))
        elif isinstance(event, RunFinished) and self._traffic is not None:
            record = {**to_record(event), "traffic": self._traffic.record()}
            self._out.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
        else:
            self._out.write(to_json(event) + "\n")
        self._out.flush()

    def traffic_update(self, update: TrafficUpdate) -> None:
        """A ``traffic`` record: each ps's rates and totals so far, and what it should carry."""
        sample = update.sample
        if sample is None or update.final:  # the run's own traffic, once over:
            return  # run_finished carries it (and the last sample was written already)
        expected = [*update.expected_per_sec, *[None] * len(sample.ps)]  # empty while not known
        record = {"type": "traffic", "t": time.time(), "global_step": sample.global_step,
                  "ps": [{**asdict(ps), "expected_per_sec": expected[i]} for i, ps in enumerate(sample.ps)]}
        self._out.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._out.flush()

    def progress_line(self) -> None:
        return None
