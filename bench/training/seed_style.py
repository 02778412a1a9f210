"""A seed-style distributed TF1 program: what the blog posts in ``shared/seeds`` do, with our
models and data so that only the training machinery differs from ``python -m trainer``.

Like the seeds, every task takes ``--ps_hosts``, ``--worker_hosts``, ``--job_name`` and
``--task_index``; a ps calls ``server.join()`` (forever: the benchmark kills it); a worker
builds its graph under ``replica_device_setter``, trains in a ``MonitoredTrainingSession``
with its defaults (``StopAtStepHook``; ``SyncReplicasOptimizer``'s hook with
``--sync_replicas``) and feeds each batch through ``feed_dict`` from a numpy ``next_batch``.
No device filters, no polling fix: a non-chief worker that finds the model uninitialised
waits ``SessionManager``'s 30 s before it looks again, as in the seeds.

What it shares with the trainer, on purpose: the model (:mod:`trainer.models`, built by
the same function with the same initial weights), the dataset (:mod:`trainer.data`), the
optimizer (plain SGD, same learning rate and batch size), the quiet TensorFlow import,
and the ``step`` event it prints (:mod:`trainer.protocol`), at the same cadence as the
trainer, so that the benchmark reads both programs' first step and throughput the same way.

    python -m bench.training.seed_style --ps_hosts=localhost:2222 --worker_hosts=localhost:2223 \\
        --job_name=worker --task_index=0 --model mlp
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from trainer import data, lifecycle, models, protocol
from trainer.settings import TrainingSettings


class DataSet:
    """The seeds' ``mnist.train``: ``next_batch`` walks a shuffled epoch, reshuffling at the end."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, seed: int) -> None:
        self._images = images
        self._labels = labels
        self._rng = np.random.default_rng(seed)
        self._order = self._rng.permutation(len(labels))
        self._position = 0

    def next_batch(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``batch_size`` examples of this epoch (a new epoch when it runs out)."""
        if self._position + batch_size > len(self._order):
            self._order = self._rng.permutation(len(self._labels))
            self._position = 0
        chosen = self._order[self._position:self._position + batch_size]
        self._position += batch_size
        return self._images[chosen], self._labels[chosen]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The seeds' flags, plus the model settings the benchmark keeps equal to the trainer's."""
    defaults = TrainingSettings()
    parser = argparse.ArgumentParser(prog="python -m bench.training.seed_style", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ps_hosts", required=True)
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--job_name", choices=("ps", "worker"), required=True)
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--model", default=defaults.model.value)
    parser.add_argument("--dataset", default=defaults.dataset.value)
    parser.add_argument("--batch_size", type=int, default=defaults.batch_size)
    parser.add_argument("--learning_rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--train_steps", type=int, default=1_000_000,
                        help="global steps (StopAtStepHook); the benchmark stops it by time")
    parser.add_argument("--sync_replicas", action="store_true")
    parser.add_argument("--log_every", type=int, default=defaults.log_every,
                        help="print a step event every N local steps (and at least once a second)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Run one ps or worker task until killed (ps) or the step target (worker)."""
    args = parse_args(argv)
    # Harness safety, not seed behaviour: die with the benchmark that started us (parent
    # death, or EOF on a stdin pipe), so a killed benchmark leaves no ps in server.join().
    lifecycle.watch_parent("auto")
    from trainer.tfimport import import_tf

    tf: Any = import_tf()
    settings = TrainingSettings().replace(model=args.model, dataset=args.dataset,
                                          batch_size=args.batch_size,
                                          learning_rate=args.learning_rate, seed=args.seed)
    ps_hosts = args.ps_hosts.split(",")
    worker_hosts = args.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return

    is_chief = args.task_index == 0
    dataset = data.load(settings)
    train = DataSet(dataset.train.images, dataset.train.labels, args.seed + args.task_index)
    shape = data.input_shape(settings)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, *shape], name="x-input")
        y = tf.placeholder(tf.int64, [None], name="y-input")
        maker = models.VariableMaker(tf, settings.seed, partitioner=None)
        logits = models.MODELS[settings.model](maker, x, True, settings.hidden_units)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        optimizer = tf.train.GradientDescentOptimizer(settings.learning_rate)
        hooks = [tf.train.StopAtStepHook(last_step=args.train_steps)]
        if args.sync_replicas:
            optimizer = tf.train.SyncReplicasOptimizer(optimizer,
                                                       replicas_to_aggregate=len(worker_hosts),
                                                       total_num_replicas=len(worker_hosts))
            hooks.append(optimizer.make_session_run_hook(is_chief))
        train_op = optimizer.minimize(loss, global_step=global_step)

    local_step = 0
    window_start, window_steps = time.monotonic(), 0
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            batch_x, batch_y = train.next_batch(settings.batch_size)
            _, loss_value, step = sess.run([train_op, loss, global_step],
                                           feed_dict={x: batch_x, y: batch_y})
            local_step += 1
            window_steps += 1
            now = time.monotonic()
            # The trainer's cadence: the first step, every log_every steps, at least once a second.
            if local_step == 1 or local_step % args.log_every == 0 or now - window_start >= 1.0:
                elapsed = max(now - window_start, 1e-9)
                lifecycle.emit(protocol.Step(
                    role="worker", index=args.task_index, global_step=int(step),
                    local_step=local_step, loss=float(loss_value),
                    examples_per_sec=round(window_steps * settings.batch_size / elapsed, 2),
                    step_time=round(elapsed / window_steps, 6), target=args.train_steps))
                window_start, window_steps = now, 0
    print(f"worker{args.task_index}: done after {local_step} local steps", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
