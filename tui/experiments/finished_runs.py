"""Reading a finished run back from its run directory, for comparisons.

A run directory (see :mod:`tui.core.rundir`) holds ``config.yaml`` (the settings as run),
``events.jsonl`` (every controller event, trainer events included), ``summary.json`` and,
when measured, ``traffic.json``. :func:`read_run` folds them into a :class:`FinishedRun`: the
settings, the outcome and the curves a comparison tables and plots. Progress is folded
with the same :class:`tui.core.progress.ProgressTracker` the live front ends use.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainer import protocol
from tui.core.progress import ProgressTracker
from tui.core.traffic import TRAFFIC_SUMMARY

#: Settings keys that are paths or bookkeeping: never a difference worth a column.
IGNORED_SETTINGS = frozenset({"checkpoint_dir", "summary_dir", "data_path"})


#: The events.jsonl records read_run folds; every other line is skipped unparsed.
_USED_RECORDS = ('"trainer_event"', '"task_state"')
_TYPE_CHARS = 32


class RunDirError(Exception):
    """A directory that is not a readable run directory."""


@dataclass(frozen=True)
class Throughput:
    """Aggregate examples/sec over the run: median and the range of the samples."""

    median: float
    low: float
    high: float


@dataclass(frozen=True)
class PsTrafficRecord:
    """One ps's measured traffic (both directions, bytes/s) and placed bytes."""

    task: str
    measured_per_sec: float
    expected_per_sec: float | None
    placed_bytes: int | None


@dataclass(frozen=True)
class FinishedRun:
    """One run as a comparison sees it. Times are seconds since the run started."""

    run_id: str
    path: Path
    outcome: str
    wall_time: float
    global_step: int
    target: int
    time_to_first_step: float | None
    time_to_target: float | None
    final_loss: float | None
    final_accuracy: float | None
    settings: tuple[tuple[str, str], ...]
    throughput: Throughput | None
    loss_curve: tuple[tuple[int, float], ...]
    rate_curve: tuple[tuple[float, float], ...]
    ps_bytes: tuple[int, ...]
    traffic: tuple[PsTrafficRecord, ...]
    traffic_imbalance: float | None

    def setting(self, name: str) -> str:
        return dict(self.settings).get(name, "")


def read_run(path: Path) -> FinishedRun:
    """Read one run directory. Raises :class:`RunDirError` naming what is missing."""
    summary = _json(path / "summary.json")
    config = _yaml(path / "config.yaml")
    started = float(summary.get("started_at") or 0.0)
    tracker = ProgressTracker(int(summary.get("target") or 0))
    losses: dict[int, float] = {}
    rates: list[tuple[float, float]] = []
    reached: float | None = None
    first_step: float | None = None
    target = int(summary.get("target") or 0)
    events = path / "events.jsonl"
    if not events.is_file():
        raise RunDirError(f"{path}: no events.jsonl (not a run directory?)")
    with open(events, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            # Most lines are task output, which a comparison does not use: passed over
            # before parsing (a record's type comes first, tui.core.event_records.to_json).
            head = line[:_TYPE_CHARS]
            if not any(kind in head for kind in _USED_RECORDS):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise RunDirError(f"{events}:{number}:1: not a JSON line") from None
            kind = record.get("type")
            if kind == "task_state" and record.get("new") in ("succeeded", "failed", "stopped"):
                tracker.worker_exited(str(record.get("task")))
            if kind != "trainer_event":
                continue
            event = protocol.parse_event(json.dumps(record.get("event")))
            if event is None:
                continue
            received = _number(record.get("t"))
            tracker.update(str(record.get("task")), event, event.t if received is None else received)
            if isinstance(event, protocol.Step):
                first_step = event.t - started if first_step is None else first_step
                if event.loss is not None:
                    losses[event.global_step] = event.loss
                rates.append((event.t - started, tracker.snapshot().examples_per_sec))
            step = getattr(event, "global_step", 0)
            if reached is None and target and isinstance(event, (protocol.Step, protocol.Done)) \
                    and step >= target:
                reached = event.t - started
    positive = [rate for _, rate in rates if rate > 0]
    throughput = (Throughput(statistics.median(positive), min(positive), max(positive))
                  if positive else None)
    traffic, imbalance = _traffic(path)
    placement = tracker.placement
    return FinishedRun(
        run_id=str(summary.get("run_id") or path.name), path=path,
        outcome=str(summary.get("outcome", "")), wall_time=float(summary.get("wall_time") or 0.0),
        global_step=int(summary.get("global_step") or 0), target=target, time_to_first_step=first_step,
        time_to_target=reached,
        final_loss=_number(summary.get("final_loss")),
        final_accuracy=_number(summary.get("final_accuracy")),
        settings=_settings(config), throughput=throughput,
        loss_curve=tuple(sorted(losses.items())), rate_curve=tuple(rates),
        ps_bytes=tuple(placement.ps_bytes) if placement else (), traffic=traffic,
        traffic_imbalance=imbalance)


def _settings(config: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    training = config.get("training") or {}
    cluster = config.get("cluster") or {}
    found = {"ps": str(len(cluster.get("ps") or ())), "workers": str(len(cluster.get("worker") or ()))}
    for key, value in training.items():
        if key not in IGNORED_SETTINGS:
            found[str(key)] = str(value)
    return tuple(found.items())


def _traffic(path: Path) -> tuple[tuple[PsTrafficRecord, ...], float | None]:
    file = path / TRAFFIC_SUMMARY
    if not file.is_file():
        return (), None
    summary = (_json(file).get("summary") or {})
    rows = tuple(PsTrafficRecord(str(ps["task"]), float(ps["measured_per_sec"]),
                                 _number(ps.get("expected_per_sec")),
                                 int(ps["placed_bytes"]) if ps.get("placed_bytes") is not None else None)
                 for ps in summary.get("ps") or ())
    return rows, _number(summary.get("measured_imbalance"))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _json(file: Path) -> dict[str, Any]:
    try:
        body = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(f"{file.parent}: no {file.name} (not a run directory, or the run "
                          "has not finished)") from None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{file}: cannot read: {exc}") from None
    if not isinstance(body, dict):
        raise RunDirError(f"{file}:1:1: expected a JSON object")
    return body


def _yaml(file: Path) -> dict[str, Any]:
    try:
        body = yaml.safe_load(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(f"{file.parent}: no {file.name} (not a run directory?)") from None
    except (OSError, yaml.YAMLError) as exc:
        raise RunDirError(f"{file}: cannot read: {exc}") from None
    return body if isinstance(body, dict) else {}


def runs_of_config(root: Path, config_path: Path) -> list[Path]:
    """Run directories under ``root`` (sweep points included) made from ``config_path``,
    as ``config.yaml``'s first line records it."""
    header = f"# resolved from {config_path}"
    found = []
    for file in (*root.glob("*/config.yaml"), *root.glob("sweep-*/*/*/config.yaml")):
        try:
            with open(file, encoding="utf-8") as handle:
                first = handle.readline().rstrip("\n")
        except OSError:
            continue
        if first == header:
            found.append(file.parent)
    return sorted(found, key=lambda p: p.name)
