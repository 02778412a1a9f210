"""Carrying out the restart policy (:mod:`tui.config.restart_policy`) for a task that failed by
itself: restart it alone after the backoff, restart the whole cluster, settle first, or fail
the run. Each restart is an :class:`~tui.core.events.Incident` of the summary."""

from __future__ import annotations

import dataclasses

from tui.config.cluster import Job, RestartPolicy
from tui.config.restart_policy import PEER_LOSS_SETTLE, Decision, FailureFacts, PsFacts, decide
from tui.core.clock import Wake, first_completed
from tui.core.events import Incident, IncidentKind, Level, RunOutcome
from tui.core.hints import UNAVAILABLE
from tui.core.supervisor.process import launch
from tui.core.supervisor.records import RunRecord, TaskRecord
from tui.core.supervisor.staged import expect_ready, start_in_order
from tui.core.supervisor.stopping import stop_tasks
from tui.core.task_state import RunPhase, TaskState


def on_failure(run: RunRecord, task: TaskRecord, was_running: bool, reason: str,
               *, settled: bool = False) -> None:
    """A task failed by itself: ask the policy what next, and do it."""
    facts = FailureFacts(job=task.job, was_running=was_running,
                         declared_by_controller=task.declared_failed,
                         lost_peer=task.hint == UNAVAILABLE, cluster_up=run.phase is RunPhase.UP,
                         workers_done=run.phase is RunPhase.WORKERS_DONE, restarts=task.recent_restarts(run),
                         settled=settled, coordinated=_coordinated(run, task))
    ps = [PsFacts(p.recent_restarts(run), p.declared_failed) for p in run.of_job(Job.PS)]
    decision = decide(run.config, facts, fail_fast=run.options.fail_fast, ps=ps)
    if decision is Decision.RESTART_CLUSTER:
        _begin_cluster_restart(run, task)
        return
    if decision is Decision.SETTLE:
        # BACKOFF keeps the run open while we wait.
        run.set_state(task, TaskState.BACKOFF,
                      f"{reason}; waiting {PEER_LOSS_SETTLE:g} s for a ps failure to explain it")
        run.spawn(_judge_after_settle(run, task, reason))
        return
    if decision is Decision.RESTART_TASK:
        task.count_restart(run.clock.monotonic())
        _record_incident(run, task, reason, IncidentKind.TASK_RESTART, resumes=task)
        policy = run.config.restart_policy(task.job)
        restart = f"restart {task.recent_restarts(run)} of {policy.max_restarts}{_within(policy)} " \
                  f"in {policy.backoff:g} s"
        run.notify(Level.WARNING, f"{reason}; {restart}", task.name)
        # Into BACKOFF now, not in the coroutine: the run must not end (and a start in
        # progress must not fail) while the restart is pending.
        run.set_state(task, TaskState.BACKOFF, f"{reason}; {restart}")
        run.spawn(_restart_after_backoff(run, task, policy.backoff))
        return
    task.abandon_restart(run)
    if task.job is Job.EVALUATOR:
        run.notify(Level.WARNING, f"{reason}; not restarted again: training goes on without "
                                  "evaluations", task.name)
    if decision is Decision.LEAVE_TO_COORDINATOR:
        task.left_to_coordinator = True
        run.notify(Level.WARNING, f"{reason}; not restarted (restart policy): the coordinator carries on "
                                  "with the other workers", task.name)
    if decision is Decision.FAIL_RUN:
        run.request_stop(RunOutcome.FAILED, f"{task.name} {reason}")


def _coordinated(run: RunRecord, task: TaskRecord) -> bool:
    """Whether a TF2 coordinator runs the cluster's training and another worker still serves
    it: the program constructs ParameterServerStrategy, or its chief reported each worker's
    functions."""
    chiefs = run.of_job(Job.CHIEF)
    if not chiefs or not (run.program.coordinates_workers or run.worker_functions):
        return False
    return all(c.state.is_active for c in chiefs) and any(
        w is not task and w.state.is_active for w in run.of_job(Job.WORKER))


def _within(policy: RestartPolicy) -> str:
    """The budget's window as the notices say it (nothing for a budget of the whole run)."""
    return f" within {policy.window:g} s" if policy.window > 0 else ""


async def _judge_after_settle(run: RunRecord, task: TaskRecord, reason: str) -> None:
    """A worker lost its connection to a ps: if a ps failure (and so a cluster restart)
    follows within :data:`PEER_LOSS_SETTLE`, the worker was its casualty (the cluster restart
    starts it again); otherwise it is judged like any failed worker."""
    judged = False
    try:
        await first_completed({Wake.DONE: run.entered[RunPhase.RECOVERING].wait(),
                               Wake.STOPPED: run.entered_ending(),
                               Wake.TIMEOUT: run.clock.sleep(PEER_LOSS_SETTLE)})
        if not run.recovering and not run.stop_requested and task.state is TaskState.BACKOFF:
            judged = True  # from here on, the decision owns its BACKOFF
            on_failure(run, task, True, reason, settled=True)
    finally:
        if not judged and not run.recovering:
            task.abandon_restart(run)
        run.check_workers_done()


def _record_incident(run: RunRecord, task: TaskRecord, reason: str, kind: IncidentKind,
                     resumes: TaskRecord) -> None:
    """Note a restart for the summary; ``resumes``'s next `initialized` says where
    training went on."""
    # Its own last report where it made one (a chief that printed its result at step 21 and
    # was then killed was at 21, whatever the run's step had last been told); else the run's.
    step = task.last_step if task.last_step is not None else run.progress.global_step
    run.incidents.append(Incident(kind=kind, task=task.name, reason=reason, global_step=step,
                                  t=run.clock.time(), restarted=kind is IncidentKind.CLUSTER_RESTART))
    run.awaiting_resume[resumes.name] = len(run.incidents) - 1


def _begin_cluster_restart(run: RunRecord, cause: TaskRecord) -> None:
    """A ps failed mid-run. The model's variables on it are gone and every worker's session
    with it, so restarting the ps alone cannot help: restart every task, in order, and let
    the chief restore the latest checkpoint."""
    cause.count_restart(run.clock.monotonic())
    run.enter(RunPhase.RECOVERING)
    _record_incident(run, cause, cause.reason, IncidentKind.CLUSTER_RESTART, resumes=run.chief)
    policy = run.config.restart_policy(cause.job)
    run.notify(Level.WARNING,
               f"{cause.reason}; restarting the whole cluster (restart {cause.recent_restarts(run)} of "
               f"{policy.max_restarts}{_within(policy)} in {policy.backoff:g} s), training resumes from the "
               f"latest checkpoint", cause.name)
    run.spawn(_restart_cluster(run, cause))


async def _restart_cluster(run: RunRecord, cause: TaskRecord) -> None:
    policy = run.config.restart_policy(cause.job)
    try:
        # A task's own restart may be launching it still: let that launch end first, so the
        # process it makes is stopped with the others, not started a second time beside it.
        await run.launches_ended()
        survivors = [t for t in run.tasks.values() if t.state.is_active]
        await stop_tasks(run, survivors, f"cluster restart after {cause.name} failed")
        wake = await first_completed({Wake.DONE: run.clock.sleep(policy.backoff),
                                      Wake.STOPPED: run.entered_ending()})
        if wake is not Wake.DONE or run.stop_requested:
            return
        failure = await start_in_order(run)
        if failure:
            run.request_stop(RunOutcome.FAILED, f"cluster restart failed: {failure}")
    finally:
        if run.recovering:
            run.enter(RunPhase.UP)
        run.check_workers_done()


def _restarted(run: RunRecord, task: TaskRecord) -> None:
    """``task`` was started again for its incident: a rejoin may be claimed from now on,
    once it is seen working (its own report, or the coordinator's count of its functions
    growing past this moment's)."""
    number = run.awaiting_resume.get(task.name)
    if number is None:
        return
    run.incidents[number] = dataclasses.replace(run.incidents[number], restarted=True)
    if task.job is Job.WORKER:
        counts = run.worker_functions
        index = task.plan.spec.index
        run.resume_baseline[task.name] = counts[index] if index < len(counts) else 0


async def _restart_after_backoff(run: RunRecord, task: TaskRecord, backoff: float) -> None:
    try:
        wake = await first_completed({Wake.DONE: run.clock.sleep(backoff),
                                      Wake.STOPPED: run.entered_ending()})
        if wake is Wake.DONE and task.job is not Job.PS:
            wake = await _ps_hosts_answer(run, task)
        # A cluster restart in the meantime has started it again already.
        if wake is Wake.DONE and not run.stop_requested and not run.recovering \
                and task.state is TaskState.BACKOFF:
            failure = await launch(run, task)
            if failure is None:
                _restarted(run, task)
                run.spawn(expect_ready(run, task))
            elif run.options.fail_fast:
                run.request_stop(RunOutcome.FAILED, failure)
    finally:
        if not run.recovering:
            task.abandon_restart(run)
        run.check_workers_done()


async def _ps_hosts_answer(run: RunRecord, task: TaskRecord) -> Wake:
    """Wait while the host of a ps does not answer: a task started then would only fail
    again (its session needs every ps; seen on the lab, a worker restarted during a ps host's
    20 s cut failed a second time). The run fails at ``network: unreachable_timeout`` if the
    host never answers (tui.core.supervisor.unreachable)."""
    said = False
    while not run.stop_requested:
        silent: dict[str, list[str]] = {}
        for ps in run.of_job(Job.PS):
            if ps.plan.host.name in run.unreachable:
                silent.setdefault(ps.plan.host.name, []).append(ps.name)
        if not silent:
            break
        if not said:
            said = True
            which = ", ".join(f"host {host} ({', '.join(names)})" for host, names in sorted(silent.items()))
            run.notify(Level.INFO, f"the restart waits for {which}, which does not answer", task.name)
        wake = await first_completed({Wake.DONE: run.a_host_answers(), Wake.STOPPED: run.entered_ending()})
        if wake is not Wake.DONE:
            return wake
    return Wake.DONE
