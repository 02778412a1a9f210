"""The end of a run: how it ended (outcome and reason) and what each task did."""

from __future__ import annotations

from tui.config.cluster import Job
from tui.core.events import RunOutcome, RunSummary, TaskResult
from tui.core.supervisor.records import RunRecord
from tui.core.task_state import TaskState


def summarize(run: RunRecord) -> RunSummary:
    """The run's :class:`~tui.core.events.RunSummary`. A stop for a time limit or an interrupt
    names the outcome; otherwise any failed task makes it FAILED, every task succeeding
    SUCCEEDED, and anything else STOPPED."""
    tasks = list(run.tasks.values())
    # An evaluator only watches training: its failure is said, and never fails the run.
    evaluators = [t for t in tasks if t.job is Job.EVALUATOR]
    # A worker left to a TF2 coordinator did not end the run: the chief's end judges it.
    failed = [t for t in tasks if t.state is TaskState.FAILED and t not in evaluators
              and not t.left_to_coordinator]
    outcome: RunOutcome
    if run.stop_outcome in (RunOutcome.INTERRUPTED, RunOutcome.TIMEOUT):
        outcome, reason = run.stop_outcome, run.stop_reason
    elif failed:
        outcome = RunOutcome.FAILED
        reason = (run.stop_reason if run.stop_outcome is RunOutcome.FAILED
                  else f"{failed[0].name} {failed[0].reason}")
    elif all(t.state is TaskState.SUCCEEDED or t.restart_called_off or t.left_to_coordinator
             for t in tasks if t not in evaluators):
        outcome, reason = RunOutcome.SUCCEEDED, "; ".join(
            [f"{t.name} {t.reason} (training went on without it)"
             for t in evaluators if t.state is TaskState.FAILED]
            + [f"{t.name} {t.reason} (the coordinator went on without it)"
               for t in tasks if t.left_to_coordinator]
            + [f"{t.name}: {t.reason}" for t in tasks if t.restart_called_off])
    else:
        outcome, reason = RunOutcome.STOPPED, run.stop_reason or "stopped"
    snapshot = run.progress.snapshot()
    return RunSummary(
        run_id=run.run_id,
        run_dir=run.directory.path,
        outcome=outcome,
        reason=reason,
        started_at=run.started_wall,
        wall_time=run.clock.monotonic() - run.started_mono,
        global_step=snapshot.global_step,
        target=snapshot.target,
        final_loss=run.progress.final_loss,
        final_accuracy=run.progress.final_accuracy,
        final_train_accuracy=run.progress.final_train_accuracy,
        final_eval_loss=run.progress.final_eval_loss,
        tasks=tuple(TaskResult(name=t.name, state=t.state, exit_code=t.exit_code, reason=t.reason,
                               restarts=t.restarts, last_lines=tuple(t.tail), hint=t.hint)
                    for t in tasks),
        incidents=tuple(run.incidents),
    )
