"""What to do about a task that failed by itself: the restart policy's one decision.

Pure logic, no I/O: :func:`decide` takes the facts (:class:`FailureFacts`) and answers with a
:class:`Decision`; :mod:`tui.core.supervisor.recovery` carries it out.

- A worker that was running and may be restarted (hosts.yaml ``restart:``) is restarted on
  its own after the policy's backoff and rejoins.
- A ps takes the model's variables with it, so a ps that was running in a cluster that is up
  restarts the whole cluster in order; the chief resumes from the latest checkpoint.
- A worker that failed because a ps is unreachable is usually a casualty of that ps's failure,
  whose exit the controller may learn of a moment later: if a cluster restart could follow,
  settle first (wait :data:`PEER_LOSS_SETTLE` seconds), then judge it as a worker.
- An evaluator (its default policy restarts it) that may not be restarted again is left
  failed with a warning: it only watches training, so its failure never ends the run.
- A worker of a TF2 ParameterServerStrategy cluster that may not be restarted, while its
  coordinator (the chief) and another worker run on, is left to the coordinator: it
  reschedules the lost worker's functions on the others, as TensorFlow documents, and the
  run is the chief's to end (it had been failed at once, though the program would have
  finished well).
- Otherwise, with ``fail_fast``, the run fails; without, nothing happens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from tui.config.cluster import ClusterConfig, Job, RestartMode

#: How long a worker that lost its ps waits for that ps's failure before being judged alone.
PEER_LOSS_SETTLE = 2.0
#: How long a running task may make no progress before the stall watchdog reports it.
DEFAULT_STALL_TIMEOUT = 60.0


class StallPolicy(str, Enum):
    """What to do with a task the stall watchdog reports (``--on-stall``): only say so, kill
    it so that the restart policy restarts it like any failed task, or fail the run."""

    WARN = "warn"
    RESTART = "restart"
    FAIL = "fail"


class Decision(Enum):
    """The answer to "a task failed: what next?"."""

    RESTART_TASK = "restart_task"        # restart it alone after the backoff
    RESTART_CLUSTER = "restart_cluster"  # stop everything, restart every task in order
    SETTLE = "settle"                    # wait for a ps failure to explain it, then judge again
    FAIL_RUN = "fail_run"                # stop the run as failed
    LEAVE_TO_COORDINATOR = "leave_to_coordinator"  # leave it failed, the coordinator goes on
    NOTHING = "nothing"                  # leave it failed, the run goes on


@dataclass(frozen=True)
class FailureFacts:
    """What the decision depends on. ``was_running``: it had reported ready (a failure before
    that fails the start instead). ``declared_by_controller``: the controller itself judged it
    failed (not ready in time, did not exit): never retried. ``lost_peer``: its output says a
    ps was unreachable. ``cluster_up``: the staged start finished and no recovery is under way.
    ``restarts``: automatic restarts it had within the policy's window. ``settled``: it already waited out
    :data:`PEER_LOSS_SETTLE`. ``coordinated``: a TF2 coordinator runs and another worker
    still serves it."""

    job: Job
    was_running: bool
    declared_by_controller: bool
    lost_peer: bool
    cluster_up: bool
    workers_done: bool
    restarts: int
    settled: bool = False
    coordinated: bool = False


@dataclass(frozen=True)
class PsFacts:
    """A ps task's restart record (``restarts``: within the policy's window): would it be
    restarted if it failed now?"""

    restarts: int
    declared_failed: bool


def restarts_within(times: Sequence[float], now: float, window: float) -> int:
    """How many of the restarts made at ``times`` count against the budget at ``now``: those
    of the last ``window`` seconds (every one when ``window`` is 0), as supervisord's and
    systemd's start limits count, so that blips far apart never add up to a failed run."""
    if window <= 0:
        return len(times)
    return sum(1 for t in times if now - t < window)


def may_restart(config: ClusterConfig, job: Job, restarts: int, declared_by_controller: bool) -> bool:
    """Whether the policy allows one more automatic restart of a task of ``job``."""
    policy = config.restart_policy(job)
    return (policy.policy is RestartMode.ON_FAILURE and restarts < policy.max_restarts
            and not declared_by_controller)


def cluster_restart_possible(config: ClusterConfig, ps: Sequence[PsFacts], cluster_up: bool) -> bool:
    """Whether a ps failing now would be answered with a cluster restart."""
    return cluster_up and any(may_restart(config, Job.PS, p.restarts, p.declared_failed) for p in ps)


def decide(config: ClusterConfig, facts: FailureFacts, *, fail_fast: bool,
           ps: Sequence[PsFacts]) -> Decision:
    """What to do about a task that failed by itself (see the module docstring). ``ps``:
    each ps task's restarts so far."""
    otherwise = Decision.FAIL_RUN if fail_fast else Decision.NOTHING
    allowed = facts.was_running and may_restart(config, facts.job, facts.restarts,
                                                facts.declared_by_controller)
    if facts.job is Job.PS:
        if allowed and facts.cluster_up and not facts.workers_done:
            return Decision.RESTART_CLUSTER
        return otherwise
    if facts.job is Job.EVALUATOR:
        return Decision.RESTART_TASK if allowed else Decision.NOTHING
    if facts.was_running and facts.lost_peer and not facts.settled \
            and cluster_restart_possible(config, ps, facts.cluster_up):
        return Decision.SETTLE
    if allowed:
        return Decision.RESTART_TASK
    if facts.job is Job.WORKER and facts.was_running and facts.coordinated:
        return Decision.LEAVE_TO_COORDINATOR
    return otherwise
