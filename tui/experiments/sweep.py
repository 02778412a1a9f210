"""``tfdist-tui sweep HOSTS.yaml --set mode=sync,async --set partitions=1,2``: a grid of runs.

Every combination of the ``--set`` values (``--repeat`` times each) runs one after another
through the headless front end, each with a run directory of its own. The sweep directory
``<runs>/sweep-<id>/`` holds ``sweep.json`` (every point, its state and its run directory,
rewritten after each change), one folder per point (the run directory and the headless
output in ``output.log``) and, at the end, ``comparison.txt`` and ``comparison.html``.

The id is a digest of the config file and the grid, so running the same command again
resumes: points that finished (succeeded or failed) are kept, the rest run. A failed point
is recorded and the sweep goes on; Ctrl-C stops the point running and the sweep.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TextIO

from tui.common.exit_codes import ExitCode
from tui.common.private import own_private_dir, private_opener, replace_file
from tui.config.cluster import ClusterConfig
from tui.config.load import apply_overrides
from tui.config.yamlload import ConfigError

#: The one ``--set`` name that is not a training setting: how many worker tasks to use.
WORKERS = "workers"
SWEEP_FILE = "sweep.json"
OUTPUT_LOG = "output.log"


class PointState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def is_done(self) -> bool:
        """A resumed sweep keeps this point's result."""
        return self in (PointState.SUCCEEDED, PointState.FAILED)


@dataclass(frozen=True)
class Axis:
    """One ``--set NAME=V1,V2`` option."""

    name: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Point:
    """One combination of values, and which repetition of it."""

    index: int
    values: tuple[tuple[str, str], ...]
    repeat: int = 1
    repeats: int = 1

    @property
    def label(self) -> str:
        text = " ".join(f"{k}={v}" for k, v in self.values)
        return f"{text} #{self.repeat}" if self.repeats > 1 else text

    @property
    def folder(self) -> str:
        slug = "-".join(f"{k}_{v}" for k, v in self.values)
        return f"{self.index:03d}-{slug}-r{self.repeat}"


@dataclass(frozen=True)
class PointRecord:
    """A point's state in ``sweep.json``."""

    point: Point
    state: PointState = PointState.PENDING
    exit_code: int | None = None
    run_dir: str | None = None


def parse_axis(text: str) -> Axis:
    """``mode=sync,async`` -> Axis. Raises ValueError saying what was expected."""
    name, sep, values = text.partition("=")
    name = name.strip().replace("-", "_")
    items = tuple(v.strip() for v in values.split(",") if v.strip())
    if not sep or not name or not items:
        raise ValueError(f"expected NAME=VALUE[,VALUE...], got {text!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"{name}: a value is given twice in {text!r}")
    return Axis(name, items)


def grid(axes: Sequence[Axis], repeat: int = 1) -> tuple[Point, ...]:
    """Every combination, the first axis varying slowest, each ``repeat`` times in a row."""
    points: list[Point] = []
    for values in itertools.product(*(axis.values for axis in axes)):
        pairs = tuple(zip((axis.name for axis in axes), values, strict=True))
        for number in range(1, repeat + 1):
            points.append(Point(len(points), pairs, number, repeat))
    return tuple(points)


def point_config(config: ClusterConfig, point: Point) -> ClusterConfig:
    """The config a point runs: its training settings applied and, for ``workers=N``, only
    the first N worker tasks. Raises :class:`ConfigError` (located at ``command line``)."""
    values = dict(point.values)
    workers = values.pop(WORKERS, None)
    if workers is not None:
        available = len(config.worker_tasks)
        if not workers.isdigit() or not 1 <= int(workers) <= available:
            raise ConfigError("command line", None, None,
                              f"--set workers: expected 1 to {available} (the config's worker "
                              f"tasks), got {workers!r}")
        dropped = set(config.worker_tasks[int(workers):])
        # Every other task (ps, and a user program's chief or evaluator) stays, in order.
        config = dataclasses.replace(config, tasks=tuple(t for t in config.tasks if t not in dropped))
    try:
        return apply_overrides(config, **values)
    except ConfigError as exc:
        raise ConfigError(exc.path, exc.line, exc.column,
                          f"{exc.message.replace('--', '--set ', 1)} (point {point.label})") from None


def sweep_id(config: ClusterConfig, axes: Sequence[Axis], repeat: int) -> str:
    """Stable for the same config file and grid, so the same command resumes."""
    key = json.dumps([str(config.path.resolve()), [[a.name, list(a.values)] for a in axes], repeat])
    return hashlib.sha256(key.encode()).hexdigest()[:10]


class SweepState:
    """``sweep.json``: the points and their states, saved after every change."""

    def __init__(self, folder: Path, points: Sequence[Point]) -> None:
        self.folder = folder
        self.records = [PointRecord(p) for p in points]

    @classmethod
    def open(cls, folder: Path, points: Sequence[Point]) -> SweepState:
        """Load the sweep saved in ``folder``, or start it. A point that was running when
        the sweep stopped counts as interrupted."""
        state = cls(folder, points)
        file = folder / SWEEP_FILE
        if file.is_file():
            saved = {entry["index"]: entry for entry in json.loads(file.read_text())["points"]}
            for number, record in enumerate(state.records):
                entry = saved.get(record.point.index)
                if entry is None:
                    continue
                kept = PointState(entry["state"])
                if kept is PointState.RUNNING:
                    kept = PointState.INTERRUPTED
                state.records[number] = PointRecord(record.point, kept, entry.get("exit_code"),
                                                    entry.get("run_dir"))
        return state

    def update(self, number: int, **changes: object) -> None:
        self.records[number] = dataclasses.replace(self.records[number], **changes)  # type: ignore[arg-type]
        self.save()

    def save(self) -> None:
        points = [{"index": r.point.index, "label": r.point.label, "folder": r.point.folder,
                   "values": dict(r.point.values),
                   "repeat": r.point.repeat, "state": r.state.value, "exit_code": r.exit_code,
                   "run_dir": r.run_dir} for r in self.records]
        own_private_dir(self.folder)  # its name is predictable (resumable): refuse a planted one
        replace_file(self.folder / SWEEP_FILE, json.dumps({"points": points}, indent=2) + "\n")


#: Runs one point: (config, runs root, output stream) -> the headless exit code.
PointRunner = Callable[[ClusterConfig, Path, TextIO], Awaitable[int]]


def latest_run_dir(root: Path) -> Path | None:
    """The newest run directory under a point's folder (run ids sort by start time)."""
    runs = sorted(p for p in root.iterdir() if p.is_dir() and (p / "events.jsonl").exists()) \
        if root.is_dir() else []
    return runs[-1] if runs else None


async def run_points(state: SweepState, configs: Sequence[ClusterConfig], runner: PointRunner,
                     out: TextIO) -> ExitCode:
    """Run every point not yet done, in order. Returns 130 when one was interrupted (the
    rest stay pending), 1 when any failed, else 0."""
    total = len(state.records)
    for number, record in enumerate(state.records):
        head = f"[{number + 1}/{total}] {record.point.label}"
        if record.state.is_done:
            out.write(f"{head}: {record.state.value} earlier, kept\n")
            continue
        folder = state.folder / record.point.folder
        own_private_dir(folder)
        state.update(number, state=PointState.RUNNING, exit_code=None)
        out.write(f"{head}: running (output in {folder / OUTPUT_LOG})\n")
        out.flush()
        with open(folder / OUTPUT_LOG, "a", encoding="utf-8", opener=private_opener) as log:
            code = await runner(configs[number], folder, log)
        run_dir = latest_run_dir(folder)
        outcome = (PointState.SUCCEEDED if code == ExitCode.OK else
                   PointState.INTERRUPTED if code == ExitCode.INTERRUPTED else PointState.FAILED)
        state.update(number, state=outcome, exit_code=int(code),
                     run_dir=str(run_dir) if run_dir else None)
        out.write(f"{head}: {outcome.value} (exit code {int(code)})\n")
        out.flush()
        if outcome is PointState.INTERRUPTED:
            out.write(f"interrupted; run the same command again to resume the sweep in {state.folder}\n")
            return ExitCode.INTERRUPTED
    failed = any(r.state is PointState.FAILED for r in state.records)
    return ExitCode.TASK_FAILED if failed else ExitCode.OK
