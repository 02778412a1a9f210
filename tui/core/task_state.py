"""The life of a task and of a run, as state machines: every allowed transition is declared
here, once, and :func:`check_task_transition` / :func:`check_run_transition` are the one place
that checks them. An illegal transition is a controller bug: it raises
:class:`IllegalTransition` (the tests see it at once instead of a run that hangs).

A task (:class:`TaskState`, what front ends show)::

    pending -> starting -> running -> stopping -> stopped
                  |          |          |-----> failed (a failure the controller declared)
                  |          |          '-----> succeeded (its work was done: see tui.program)
                  |          '-> succeeded / failed (exited by itself)
                  '-> failed (exited or could not start before reporting ready)
    failed / stopped -> backoff -> starting   (a restart is coming: the restart policy's
                           '-> failed / stopped  backoff, a by-hand restart, or a failed
                                                 worker waiting to see whether its ps failed)
    starting / running -> unreachable -> starting / running  (its host answers again: it
                              |                              carries on where it was)
                              '-> stopping / succeeded / failed / stopped  (its exit came, the
                                  controller stops it, or its connection was lost for good)

Unreachable: the task's host stopped answering the controller. What the task does is unknown;
it is not a failure (tui.core.supervisor.unreachable).

A run (:class:`RunPhase`): starting -> up -> (recovering -> up)* -> workers_done -> ending ->
finished, where ending (a stop was requested, or the run is over and its tasks are stopped)
may come from any phase before it.
"""

from __future__ import annotations

from enum import Enum


class TaskState(Enum):
    """Where a task is in its life. The exit code of a finished task is carried separately."""

    PENDING = "pending"        # not started (yet)
    STARTING = "starting"      # process launched, `ready` not seen yet
    RUNNING = "running"        # reported `ready`
    STOPPING = "stopping"      # the controller is stopping it (SIGTERM sent, exit not seen yet)
    BACKOFF = "backoff"        # failed or stopped, and a restart is coming (tui.core.task_state)
    SUCCEEDED = "succeeded"    # exited 0 by itself
    FAILED = "failed"          # exited non-zero by itself, or never got ready, or never exited
    STOPPED = "stopped"        # exited because the controller stopped it
    UNREACHABLE = "unreachable"  # its host does not answer: running or not, nobody knows yet

    @property
    def is_active(self) -> bool:
        """A process exists (or is being launched) for the task. (An unreachable one may: it
        is stopped like the others, and its host's lease ends it if the stop cannot reach it.)"""
        return self in (TaskState.STARTING, TaskState.RUNNING, TaskState.STOPPING, TaskState.UNREACHABLE)

    @property
    def is_finished(self) -> bool:
        """The task exited and nothing will start it again by itself (BACKOFF is neither
        active nor finished: its restart is coming)."""
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.STOPPED)


class IllegalTransition(RuntimeError):
    """A state change that the machine does not allow: a bug in the controller."""


_S = TaskState

#: Every allowed task transition. A launch that fails (``could not start``) goes to FAILED
#: from wherever a launch may begin.
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    _S.PENDING: frozenset({_S.STARTING, _S.FAILED}),
    _S.STARTING: frozenset({_S.RUNNING, _S.STOPPING, _S.SUCCEEDED, _S.FAILED, _S.UNREACHABLE}),
    _S.RUNNING: frozenset({_S.STOPPING, _S.SUCCEEDED, _S.FAILED, _S.UNREACHABLE}),
    # Back to where it was when its host answers again (RUNNING: its `ready` may also have
    # come in the meantime); its exit, a stop, or a connection lost for good end it.
    _S.UNREACHABLE: frozenset({_S.STARTING, _S.RUNNING, _S.STOPPING, _S.SUCCEEDED, _S.FAILED,
                               _S.STOPPED}),
    # SUCCEEDED: a task ended by the controller whose work was done (a user's ps once the
    # workers finished, a worker hung after the target step).
    _S.STOPPING: frozenset({_S.STOPPED, _S.FAILED, _S.SUCCEEDED}),
    # (BACKOFF -> BACKOFF: a worker that waited for a ps failure is then restarted on its own.)
    _S.BACKOFF: frozenset({_S.STARTING, _S.FAILED, _S.STOPPED, _S.BACKOFF}),
    _S.SUCCEEDED: frozenset({_S.STARTING, _S.FAILED}),
    _S.FAILED: frozenset({_S.STARTING, _S.BACKOFF, _S.FAILED}),
    _S.STOPPED: frozenset({_S.STARTING, _S.BACKOFF, _S.FAILED}),
}


def check_task_transition(task: str, old: TaskState, new: TaskState) -> None:
    """Raise :class:`IllegalTransition` unless ``old -> new`` is declared above."""
    if new not in TASK_TRANSITIONS[old]:
        raise IllegalTransition(f"{task}: {old.value} -> {new.value} is not a task transition")


class RunPhase(Enum):
    """Where a run is. Decisions about failures depend on it (a ps failure is recoverable
    only once the cluster is up; during a recovery every failure is its casualty)."""

    STARTING = "starting"          # the staged start is under way
    UP = "up"                      # every task was started and reported ready
    RECOVERING = "recovering"      # a cluster restart is under way
    WORKERS_DONE = "workers_done"  # training is over (every worker, or the chief: RunEnd); the rest end
    ENDING = "ending"              # a stop was requested or the run is over: tasks are stopped
    FINISHED = "finished"          # every task exited and the summary is out


_P = RunPhase

RUN_TRANSITIONS: dict[RunPhase, frozenset[RunPhase]] = {
    _P.STARTING: frozenset({_P.UP, _P.WORKERS_DONE, _P.ENDING}),
    _P.UP: frozenset({_P.RECOVERING, _P.WORKERS_DONE, _P.ENDING}),
    _P.RECOVERING: frozenset({_P.UP, _P.ENDING}),
    _P.WORKERS_DONE: frozenset({_P.ENDING}),
    _P.ENDING: frozenset({_P.FINISHED}),
    _P.FINISHED: frozenset(),
}


def check_run_transition(old: RunPhase, new: RunPhase) -> None:
    """Raise :class:`IllegalTransition` unless ``old -> new`` is declared above."""
    if new not in RUN_TRANSITIONS[old]:
        raise IllegalTransition(f"run: {old.value} -> {new.value} is not a run transition")
