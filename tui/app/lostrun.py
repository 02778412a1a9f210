"""The record of a run whose core died under it (SIGKILL, the kernel's OOM killer): the app,
which outlives its core, writes the run's ``summary.json`` and its ``run_finished`` line with
what it knows and why the run ended, so the run is a finished one to ``tfdist-tui compare``
and to the Runs pane, not one that "has not finished", as when a SIGKILLed
core left no record.

What it knows is what it showed: each task's last state, exit code, reason, restarts and
last lines, the run's progress. Nothing is written when the core finished the run itself
(its summary stands) or when no run had started."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from tui.app.state import Dashboard
from tui.common.private import replace_file
from tui.core.event_records import summary_record, to_json
from tui.core.events import RunFinished, RunOutcome, RunSummary, TaskResult

#: Last lines of each task's log kept in the summary (as the core's summary keeps a tail).
LAST_LINES = 20


def lost_summary(state: Dashboard, why: str, now: float) -> RunSummary | None:
    """The summary the app can give a run its core left unfinished; None if there is none."""
    if not state.run_id or not state.run_dir or state.finished is not None:
        return None
    progress = state.progress
    tasks = tuple(
        TaskResult(name=row.name, state=row.state, exit_code=row.exit_code, reason=row.reason,
                   restarts=row.restarts, hint=row.hint,
                   last_lines=tuple(list(state.logs[row.name].lines)[-LAST_LINES:])
                   if row.name in state.logs else ())
        for row in state.rows.values())
    started = state.started or now
    return RunSummary(
        run_id=state.run_id, run_dir=Path(state.run_dir), outcome=RunOutcome.INTERRUPTED,
        reason=why, started_at=started, wall_time=max(0.0, now - started),
        global_step=progress.global_step, target=progress.target, final_loss=progress.loss,
        final_accuracy=progress.accuracy, tasks=tasks)


def record_lost_run(state: Dashboard, why: str) -> RunSummary | None:
    """Write the summary of the run the core left (unless the core wrote one), add its end to
    ``events.jsonl``, and show the run as ended; the summary, or None."""
    summary = lost_summary(state, why, time.time())
    if summary is None:
        return None
    target = summary.run_dir / "summary.json"
    if not target.exists():  # the core may have written it just before it died
        with contextlib.suppress(OSError):  # a run directory gone: the app says so anyway
            replace_file(target, json.dumps(summary_record(summary), indent=2) + "\n")
            with open(summary.run_dir / "events.jsonl", "a", encoding="utf-8") as events:
                events.write(to_json(RunFinished(summary=summary)) + "\n")
    state.finished = summary
    state.tasks_changed = True
    return summary
