"""What each task does once its server listens: a ps waits for every worker to finish; a
worker initialises (chief) or waits for the model (others), trains to the target global
step, and tells every ps it is done."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer import data as datasets
from trainer import lifecycle, portclaim, protocol, step_faults, threads
from trainer.anatomy import Sampler, anatomy
from trainer.cluster import Cluster, Role
from trainer.graph import TrainGraph, build, done_queue
from trainer.lifecycle import PROCESS_START, emit, log, root_cause
from trainer.settings import Mode, TrainingSettings

#: How often a non-chief worker checks whether the chief has initialised the model: first
#: after the shortest wait (a warm chief initialises within tens of ms), each wait twice
#: the last, up to the longest. The seeds' SessionManager waits 30 s between checks
#: (tensorflow/tensorflow#10679).
READY_POLL_SECS = (0.005, 0.05)
#: How long the refill of the input before a step's retry (:meth:`Worker.fill_input`) may take.
#: It is local work, milliseconds (seconds on a loaded machine), yet on the lab, after a 20 s
#: cut of a worker's host, the refill after the reset hung in TensorFlow and never returned:
#: the worker made no step again until the controller ended it past the target, and the ps
#: never got its done token. Past this the step fails as it would have without the retry,
#: and the restart policy takes over.
REFILL_DEADLINE_SECS = 15.0
#: How long an async training step may take before TensorFlow gives it up (RunOptions'
#: ``timeout_in_ms``: DeadlineExceededError); it is then tried again
#: (:data:`trainer.step_faults.DEADLINE_RETRY_SECS`), each try with twice the time of the last.
#: Without it a step could wait for good: on the lab, after a 20 s cut of the ps's host, a
#: worker's step in flight at the cut (or its retry after a reset) never returned; every
#: worker stood still until the run's timeout, or, one left behind, was ended past the target
#: having made no step since the cut. Its connection to the ps had most likely died at the far
#: end with no word of it here: with the deadline, the try after such a step was often reset.
#: An mlp step takes milliseconds, a launch's first step seconds on a loaded machine: this is
#: far past either, and short enough that a step caught in a cut of about its
#: length is tried again as the link returns (the try's reset, if its connection died, comes at
#: once). A step that is slow but alive (a large model over a capped link) costs a try and ends
#: on a later one. Sync steps have none: one waits for its round's token as long as its slowest
#: replica takes.
STEP_DEADLINE_SECS = 20.0
#: A step's deadline is also at least this many times the slowest of the worker's last
#: :data:`DEADLINE_WINDOW` steps: a large model's step on a loaded CPU can take tens of seconds
#: alive, and a fixed 20 s would give up every one of its steps once (its work thrown away)
#: before the doubled try passed.
DEADLINE_FACTOR = 10.0
DEADLINE_WINDOW = 16
EVAL_BATCH = 1024


def server_config(tf: Any, role: Role, devices: int = 1) -> Any:
    """Session/server options. Each task only talks to the ps tasks and itself, so a worker
    never waits for another worker (tensorflow/tensorflow#16611)."""
    filters = [f"/job:ps/task:{role.index}"] if role.job == "ps" else \
        ["/job:ps", f"/job:worker/task:{role.index}"]
    config = tf.ConfigProto(device_filters=filters, allow_soft_placement=True)
    threads.apply(config, threads.from_env())
    if devices > 1:
        config.device_count["CPU"] = devices
    return config


def start_server(tf: Any, cluster: Cluster, role: Role, devices: int = 1) -> Any:
    portclaim.release()  # held since the process started; see trainer.portclaim
    server = tf.train.Server(tf.train.ClusterSpec(cluster.spec()), job_name=role.job,
                             task_index=role.index, config=server_config(tf, role, devices),
                             start=True)
    from trainer.tfimport import tf_version

    address = (cluster.ps if role.job == "ps" else cluster.worker)[role.index]
    emit(protocol.Ready(role=role.job, index=role.index, pid=os.getpid(), address=address,
                        tf_version=tf_version()))
    return server


def run_ps(tf: Any, cluster: Cluster, role: Role, hold: bool = False) -> None:
    """Serve variables until every worker has reported done."""
    if hold:
        lifecycle.hold(role.job, role.index)
    server = start_server(tf, cluster, role)
    graph = tf.Graph()
    with graph.as_default():
        dequeue = done_queue(tf, role.index).dequeue()
    sess = tf.Session(server.target, graph=graph, config=server_config(tf, role))
    finished: set[int] = set()
    while len(finished) < len(cluster.worker):
        finished.add(int(sess.run(dequeue)))
    emit(protocol.Done(role="ps", index=role.index, reason=protocol.REASON_CLUSTER_DONE))
    _leave_with_session_open()


@dataclass
class _Window:
    """Throughput since the last ``step`` event."""

    started: float
    steps: int = 0


class Worker:
    """One worker task's run."""

    def __init__(self, tf: Any, settings: TrainingSettings, cluster: Cluster, role: Role,
                 hold: bool = False):
        self.tf = tf
        self.settings = settings
        self.cluster = cluster
        self.role = role
        self.is_chief = role.is_chief
        gpus = tf.config.list_physical_devices("GPU") if settings.gpus > 1 else []
        self.use_gpu = len(gpus) >= settings.gpus
        # Everything that needs no server comes first, so that under a controller's staged
        # start (--hold) it overlaps with the other tasks' start-up.
        self.data = datasets.load(settings)
        self.graph: TrainGraph = build(tf, settings, cluster, role.index,
                                       datasets.input_shape(settings), self.use_gpu)
        if hold:
            lifecycle.hold(role.job, role.index)
        self.server = start_server(tf, cluster, role,
                                   devices=1 if self.use_gpu else settings.gpus)
        if self.is_chief:
            emit(self.graph.placement)
        self.sess = tf.Session(self.server.target, graph=self.graph.graph,
                               config=server_config(tf, role))
        self.local_step = 0
        self.recent_steps: deque[float] = deque(maxlen=DEADLINE_WINDOW)  # seconds of passed tries
        self.last_loss: float | None = None
        self.writer = None
        if settings.summary_dir:
            self.writer = tf.summary.FileWriter(
                os.path.join(os.path.expanduser(settings.summary_dir), f"worker{role.index}"),
                self.graph.graph if self.is_chief else None)

    # -- start-up -------------------------------------------------------------------------

    def fill_input(self) -> None:
        """(Re)start the input pipeline. It lives on this worker: filling it does not need
        the ps."""
        g = self.graph
        self.sess.run(g.iterator_init, feed_dict={g.x_feed: self.data.train.images,
                                                  g.y_feed: self.data.train.labels})

    def initialize(self) -> int:
        g = self.graph
        self.fill_input()
        if self.is_chief and self.sess.run(g.ready_op).size:
            self._restore_or_init()
        elif self.is_chief:
            # A restarted chief rejoining a live cluster: the ps tasks hold the current
            # model, which initialising (or restoring an older checkpoint) would throw away.
            log("worker0: the model is already initialized on the ps tasks; rejoining")
            if g.release_tokens is not None:
                # Sync: the old chief may have died between applying a round and handing
                # out its tokens, leaving every other worker waiting for a token while our
                # next round waits for their gradients. A token each unblocks them; at
                # worst a worker runs one step ahead, whose extra gradient joins a round.
                self.sess.run(g.release_tokens)
        else:
            wait, longest = READY_POLL_SECS
            while self.sess.run(g.ready_op).size:
                time.sleep(wait)
                wait = min(2 * wait, longest)
        self.sess.run(g.local_init_op)
        step = int(self.sess.run(g.global_step))
        emit(protocol.Initialized(role="worker", index=self.role.index, global_step=step,
                                  seconds=round(time.time() - PROCESS_START, 3),
                                  is_chief=self.is_chief))
        return step

    def _restore_or_init(self) -> None:
        tf, g = self.tf, self.graph
        directory = self._checkpoint_dir()
        latest = tf.train.latest_checkpoint(directory) if directory else None
        if latest is None:
            self.sess.run(g.init_op)
            return
        try:
            g.saver.restore(self.sess, latest)
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, ValueError) as exc:
            self.sess.run(g.init_op)
            reason = root_cause(str(exc))[:300]
            emit(protocol.Checkpoint(role="worker", index=0, action=protocol.CHECKPOINT_FRESH,
                                     global_step=0, path=latest,
                                     reason=f"cannot restore ({type(exc).__name__}): {reason}"))
            return
        emit(protocol.Checkpoint(role="worker", index=0, action=protocol.CHECKPOINT_RESTORED,
                                 global_step=int(self.sess.run(g.global_step)), path=latest))

    def _checkpoint_dir(self) -> str | None:
        if not self.settings.checkpoint_dir:
            return None
        return os.path.expanduser(self.settings.checkpoint_dir)

    # -- training -------------------------------------------------------------------------

    def train(self, start_step: int) -> str:
        """Train until the target global step; returns the ``done`` reason."""
        target = self.settings.steps
        if start_step >= target:
            return protocol.REASON_ALREADY_COMPLETE
        round_runner = None
        if self.is_chief and self.settings.mode is Mode.SYNC:
            round_runner = threading.Thread(target=self._run_sync_rounds, name="sync-rounds",
                                            daemon=True)
            round_runner.start()
        window = _Window(started=time.monotonic())
        last_emit = window.started
        step = start_step
        next_checkpoint = (step // self.settings.checkpoint_every + 1) * self.settings.checkpoint_every
        next_eval = (step // self.settings.eval_every + 1) * self.settings.eval_every \
            if self.settings.eval_every else None
        sampler = Sampler()
        while step < target:
            metadata = self.tf.RunMetadata() if sampler.due(self.local_step + 1) else None
            # A step whose global step is reported fetches the value its own increment
            # returned (fused async steps otherwise know only a lower bound: their read + 1).
            after = self.local_step + 1
            reports = (after == 1 or after % self.settings.log_every == 0
                       or time.monotonic() - last_emit >= 1.0)
            began = time.time()
            step, loss = self.step(metadata, exact=reports)
            ended = time.time()
            step = int(step)
            self.local_step += 1
            sampler.ran(self.local_step, ended - began, traced=metadata is not None)
            if metadata is not None:
                emit(anatomy(metadata, worker=self.role.index, num_ps=len(self.cluster.ps),
                             sync=self.settings.mode is Mode.SYNC, start=began, end=ended,
                             global_step=step, local_step=self.local_step, sampler=sampler))
            window.steps += 1
            self.last_loss = float(loss)
            now = time.monotonic()
            if step >= target and not reports and self.graph.step_after is not None:
                # The last step knew a lower bound only: the global step as it now stands.
                step = max(step, int(self.sess.run(self.graph.global_step)))
            if reports or step >= target:
                self._emit_step(step, window, now)
                window = _Window(started=now)
                last_emit = now
            if self.is_chief and self._checkpoint_dir() and step >= next_checkpoint and step < target:
                self.save(step)
                next_checkpoint = (step // self.settings.checkpoint_every + 1) * \
                    self.settings.checkpoint_every
            if self.is_chief and next_eval is not None and step >= next_eval and step < target:
                self.evaluate(step)
                next_eval = (step // self.settings.eval_every + 1) * self.settings.eval_every
        if round_runner is not None:
            round_runner.join()
        return protocol.REASON_TARGET_REACHED

    def _run(self, fetches: list[Any], metadata: Any, deadline: float | None = None) -> tuple[Any, Any]:
        """Run the step's fetches (traced into ``metadata`` unless None; given up after
        ``deadline`` seconds unless None): (step, loss)."""
        options: dict[str, int] = {}
        if metadata is not None:
            options["trace_level"] = self.tf.RunOptions.FULL_TRACE
        if deadline is not None:
            options["timeout_in_ms"] = max(1, round(deadline * 1000))
        if not options:
            step, loss, *_ = self.sess.run(fetches)
        else:
            step, loss, *_ = self.sess.run(fetches, options=self.tf.RunOptions(**options),
                                           run_metadata=metadata)
        return step, loss

    def step_deadline(self) -> float:
        """The first try's deadline for the next async step: :data:`STEP_DEADLINE_SECS`, or
        :data:`DEADLINE_FACTOR` times the slowest of the recent steps where that is longer."""
        return max(STEP_DEADLINE_SECS, DEADLINE_FACTOR * max(self.recent_steps, default=0.0))

    def step(self, metadata: Any = None, exact: bool = False) -> tuple[Any, Any]:
        """One training step: (global step, loss; the global step exact, or fused async and
        not ``exact`` its lower bound: :attr:`TrainGraph.step_after`). Async, each try has a
        deadline (:data:`STEP_DEADLINE_SECS`, or :data:`DEADLINE_FACTOR` times the slowest
        recent step), and a step that failed in a way that may pass
        (:func:`trainer.step_faults.passing`: a connection reset, a ps that could not connect
        to this worker's address, a request a peer received twice, the deadline) is tried
        again, as is the cancelled step that may follow it; any other error, such a failure
        that stays, or a refill of the input for the retry that does not end
        (:data:`REFILL_DEADLINE_SECS`) ends it. (Sync, a failed step may have taken its round's
        token: a second try could wait for a token forever.)"""
        fetches = self.graph.fetches(exact)
        if self.settings.mode is not Mode.ASYNC:
            return self._run(fetches, metadata)
        errors = self.tf.errors
        port = int(self.cluster.worker[self.role.index].rpartition(":")[2])
        deadline = self.step_deadline()
        waits: list[float] | None = None  # what is left of the first failure's schedule
        says = ""
        while True:
            try:
                began = time.monotonic()
                done = self._run(fetches, metadata, deadline)
                self.recent_steps.append(time.monotonic() - began)
                return done
            except (errors.UnavailableError, errors.AbortedError, errors.DeadlineExceededError) as exc:
                passing = step_faults.passing(errors, exc, port, deadline)
                if isinstance(exc, errors.DeadlineExceededError):
                    deadline *= 2  # (a slow step that is alive ends next time)
                if waits is None:
                    if passing is None:
                        raise
                    waits, says = list(passing.waits), passing.says
                elif passing is None and not isinstance(exc, errors.AbortedError):
                    raise  # (the step the ps cancels after such a failure is tried again too)
                elif passing is not None:
                    says = passing.says
                if not waits:
                    raise
                # (Not TensorFlow's words: they would hint at a failure that this is not yet.)
                log(f"worker{self.role.index}: a step failed {says}; trying again")
                time.sleep(waits.pop(0))
                # A step cancelled while it read its batch leaves the input iterator cancelled
                # for good: every later read fails (CancelledError, or OutOfRangeError "End of
                # sequence": seen ending a worker restarted after a ps host's cut). Filled
                # again, the try reads from the start of its shuffled data.
                if not self._refilled_within(REFILL_DEADLINE_SECS):
                    log(f"worker{self.role.index}: refilling its input for that try did not end "
                        f"within {REFILL_DEADLINE_SECS:g} s; the step fails")
                    raise exc

    def _refilled_within(self, seconds: float) -> bool:
        """Refill the input in a thread of its own: whether that ended within ``seconds``
        (an error it raised is raised here). A refill that hangs is left behind in its daemon
        thread: the task is about to fail, and its exit does not wait for it."""
        raised: list[BaseException | None] = []

        def fill() -> None:
            try:
                self.fill_input()
            except BaseException as exc:  # (handed to the step's thread, raised there)
                raised.append(exc)
            else:
                raised.append(None)

        thread = threading.Thread(target=fill, name="refill-input", daemon=True)
        thread.start()
        thread.join(seconds)
        if not raised:
            return False
        if raised[0] is not None:
            raise raised[0]
        return True

    def _run_sync_rounds(self) -> None:
        """The chief's aggregation loop (SyncReplicasOptimizer's queue runner, run by hand so
        it stops after the last round instead of waiting for gradients nobody will send)."""
        g, target = self.graph, self.settings.steps
        while int(self.sess.run(g.global_step)) < target:
            self.sess.run(g.chief_sync_op)
        # A replica that pushed a (stale) gradient after the last round is still waiting
        # for a token; hand each one a token carrying the final step so it stops too.
        self.sess.run(g.release_tokens)

    def _emit_step(self, step: int, window: _Window, now: float) -> None:
        elapsed = max(now - window.started, 1e-9)
        examples_per_sec = window.steps * self.settings.batch_size / elapsed
        emit(protocol.Step(role="worker", index=self.role.index, global_step=step,
                           local_step=self.local_step, loss=self.last_loss,
                           examples_per_sec=round(examples_per_sec, 2),
                           step_time=round(elapsed / window.steps, 6), target=self.settings.steps))
        self._summary(step, loss=self.last_loss, examples_per_sec=examples_per_sec)

    def _summary(self, step: int, **values: float | None) -> None:
        if self.writer is None:
            return
        tf = self.tf
        summary = tf.Summary(value=[tf.Summary.Value(tag=k, simple_value=v)
                                    for k, v in values.items() if v is not None])
        self.writer.add_summary(summary, step)

    def save(self, step: int) -> None:
        directory = self._checkpoint_dir()
        assert directory is not None
        os.makedirs(directory, exist_ok=True)
        path = self.graph.saver.save(self.sess, os.path.join(directory, "model.ckpt"),
                                     global_step=step)
        emit(protocol.Checkpoint(role="worker", index=0, action=protocol.CHECKPOINT_SAVED,
                                 global_step=step, path=path))

    def evaluate(self, step: int) -> protocol.Eval:
        g, test = self.graph, self.data.test
        correct = 0
        loss_sum = 0.0
        for start in range(0, len(test), EVAL_BATCH):
            c, s = self.sess.run([g.eval_correct, g.eval_loss_sum], feed_dict={
                g.eval_x: test.images[start:start + EVAL_BATCH],
                g.eval_y: test.labels[start:start + EVAL_BATCH]})
            correct += int(c)
            loss_sum += float(s)
        n = max(len(test), 1)
        loss = loss_sum / n
        result = protocol.Eval(role="worker", index=0, global_step=step, accuracy=correct / n,
                               loss=loss if np.isfinite(loss) else None, examples=len(test))
        emit(result)
        self._summary(step, accuracy=result.accuracy, eval_loss=result.loss)
        return result

    # -- the end --------------------------------------------------------------------------

    def finish(self, reason: str) -> int:
        """Evaluate and save (the chief), let the ps tasks go, say ``done``; the global step
        the run ended at."""
        step = int(self.sess.run(self.graph.global_step))
        accuracy = None
        if self.is_chief:
            accuracy = self.evaluate(step).accuracy
            if self._checkpoint_dir():
                self.save(step)
        if self.writer is not None:
            self.writer.close()
        # Only now may the ps tasks leave: the chief's evaluation and checkpoint read them.
        # One run per ps: a ps that got the last token exits at once and may fail the rest
        # of that run call, which must not keep the other ps from getting our token.
        for enqueue in self.graph.done_enqueue:
            try:
                self.sess.run(enqueue)
            except self.tf.errors.UnavailableError:
                pass  # that ps only leaves once it holds our token
        emit(protocol.Done(role="worker", index=self.role.index, reason=reason, global_step=step,
                           local_step=self.local_step, loss=self.last_loss, accuracy=accuracy))
        return step


def run_worker(tf: Any, settings: TrainingSettings, cluster: Cluster, role: Role,
               hold: bool = False) -> None:
    worker = Worker(tf, settings, cluster, role, hold)
    start = worker.initialize()
    reason = worker.train(start)
    step = worker.finish(reason)
    if reason == protocol.REASON_TARGET_REACHED:
        # The step reached, not the target: async workers each apply a last step, so a run of
        # 2000 ends at 2001 ("done at step 2001" beside "reached global step 2000" read as two
        # truths).
        log(f"worker{role.index}: reached global step {step} (target {settings.steps}) "
            f"after {worker.local_step} local steps")
    _leave_with_session_open()


def _leave_with_session_open() -> None:
    """Exit while the session is still referenced: letting it be collected closes it, and
    closing a distributed session contacts ps tasks that may already have exited, which can
    block for seconds."""
    lifecycle.exit_now(lifecycle.EXIT_OK)
