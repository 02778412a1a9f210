"""The Runs pane's catalogue of past runs: what its list shows, read cheaply (each run's
``summary.json`` and ``config.yaml``, never its ``events.jsonl``) and cached by file times,
on a worker thread. The full record a comparison needs (:func:`tui.experiments.finished_runs.read_run`, which
reads every event) is read only for the runs being compared, and cached the same way."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from tui.experiments.finished_runs import (
    FinishedRun,
    RunDirError,
    _json,
    _number,
    _settings,
    _yaml,
    read_run,
    runs_of_config,
)

#: At most this many past runs are listed (the newest): a runs folder of thousands of runs
#: must not make the pane slow. The run directories keep them all.
MAX_LISTED = 500


@dataclass(frozen=True)
class RunBrief:
    """One row of the Runs list."""

    run_id: str
    path: Path
    outcome: str
    wall_time: float
    final_loss: float | None
    final_accuracy: float | None
    settings: tuple[tuple[str, str], ...]

    def setting(self, name: str) -> str:
        return dict(self.settings).get(name, "")


def read_brief(path: Path) -> RunBrief:
    """The list row of one run directory: its summary and settings only. Raises
    :class:`RunDirError` for a run still running (no summary yet) or not a run."""
    summary = _json(path / "summary.json")
    config = _yaml(path / "config.yaml")
    return RunBrief(run_id=str(summary.get("run_id") or path.name), path=path,
                    outcome=str(summary.get("outcome", "")),
                    wall_time=float(summary.get("wall_time") or 0.0),
                    final_loss=_number(summary.get("final_loss")),
                    final_accuracy=_number(summary.get("final_accuracy")),
                    settings=_settings(config))


def _stamp(path: Path) -> int | None:
    """When the run's summary was last written (a finished run does not change)."""
    try:
        return (path / "summary.json").stat().st_mtime_ns
    except OSError:
        return None


class RunCatalog:
    """Past runs of one config under one runs folder, each read once per change. Called
    from worker threads (one at a time per method, but list and compare may overlap)."""

    def __init__(self, runs_root: Path, config_path: Path) -> None:
        self.runs_root = runs_root
        self.config_path = config_path
        self._lock = threading.Lock()
        self._briefs: dict[Path, tuple[int, RunBrief]] = {}
        self._records: dict[Path, tuple[int, FinishedRun]] = {}

    def list(self) -> list[RunBrief]:
        """The finished runs, newest first (at most :data:`MAX_LISTED`)."""
        stamped = [(stamp, path) for path in runs_of_config(self.runs_root, self.config_path)
                   if (stamp := _stamp(path)) is not None]  # (else still running, or not a run)
        found = []
        for stamp, path in sorted(stamped, reverse=True)[:MAX_LISTED]:
            with self._lock:
                cached = self._briefs.get(path)
            if cached is not None and cached[0] == stamp:
                found.append(cached[1])
                continue
            try:
                brief = read_brief(path)
            except RunDirError:
                continue
            with self._lock:
                self._briefs[path] = (stamp, brief)
            found.append(brief)
        return sorted(found, key=lambda brief: brief.run_id, reverse=True)

    def record(self, path: Path) -> FinishedRun:
        """The full record of one run (every event read), cached."""
        stamp = _stamp(path) or 0
        with self._lock:
            cached = self._records.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        record = read_run(path)
        with self._lock:
            self._records[path] = (stamp, record)
        return record
