"""Between-graph replicated training, ``TF_CONFIG`` style: the cluster and this task's role
come from the ``TF_CONFIG`` environment variable; training runs in a
``MonitoredTrainingSession`` with ``StopAtStepHook`` and TensorFlow's ``LoggingTensorHook``;
``--sync`` wraps the optimizer in ``SyncReplicasOptimizer``; ``--partitions`` shards the big
weights with ``fixed_size_partitioner``. A small MLP on scikit-learn's digits (offline).

Run by hand, one terminal per task (a ``chief`` job is accepted too; without one, worker 0
is the chief):

    export TF_CONFIG='{"cluster": {"ps": ["localhost:2222"],
        "worker": ["localhost:2223", "localhost:2224"]}, "task": {"type": "ps", "index": 0}}'
    python train.py --steps=1000 --sync=false --partitions=2

Nothing here knows about tfdist-tui: the ps calls ``server.join()`` forever, a non-chief
waits 30 s for the chief's initialisation, and in sync mode the chief hangs at the end.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow.compat.v1 as tf
from absl import app, flags
from sklearn.datasets import load_digits

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 1000, "global steps to train")
flags.DEFINE_integer("batch_size", 64, "examples per worker per step")
flags.DEFINE_float("learning_rate", 0.05, "SGD learning rate")
flags.DEFINE_string("sync", "false", "true: SyncReplicasOptimizer over all workers")
flags.DEFINE_integer("partitions", 1, "shards of each large variable across the ps tasks")
flags.DEFINE_string("checkpoint_dir", None, "checkpoints and summaries (optional)")
flags.DEFINE_integer("log_every", 100, "steps between two loss lines")


def dense(inputs: tf.Tensor, units: int, name: str,
          activation: Callable[[tf.Tensor], tf.Tensor] | None = None) -> tf.Tensor:
    """A fully connected layer from tf.get_variable (tf.layers needs Keras 2)."""
    with tf.variable_scope(name):
        weights = tf.get_variable("kernel", [int(inputs.shape[-1]), units],
                                  initializer=tf.glorot_uniform_initializer())
        biases = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
    out = tf.matmul(inputs, weights) + biases
    return activation(out) if activation is not None else out


def build(num_workers: int, is_chief: bool, sync: bool) -> tuple[Any, ...]:
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    global_step = tf.train.get_or_create_global_step()
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    partitioner = (tf.fixed_size_partitioner(FLAGS.partitions)
                   if FLAGS.partitions > 1 else None)
    with tf.variable_scope("model", partitioner=partitioner):
        hidden = dense(x, 256, "hidden1", tf.nn.relu)
        hidden = dense(hidden, 128, "hidden2", tf.nn.relu)
        logits = dense(hidden, 10, "logits")
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    opt = tf.train.GradientDescentOptimizer(FLAGS.learning_rate)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.steps),
             tf.train.LoggingTensorHook({"loss": loss, "step": global_step},
                                        every_n_iter=FLAGS.log_every)]
    if sync:
        opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=num_workers,
                                             total_num_replicas=num_workers)
        hooks.append(opt.make_session_run_hook(is_chief))
    train_op = opt.minimize(loss, global_step=global_step)
    return images, labels, x, y, train_op, hooks


def main(argv: list[str]) -> None:
    del argv
    tf.disable_v2_behavior()
    tf.logging.set_verbosity(tf.logging.INFO)
    config = json.loads(os.environ["TF_CONFIG"])
    cluster = tf.train.ClusterSpec(config["cluster"])
    job, index = config["task"]["type"], int(config["task"].get("index", 0))
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return
    sync = FLAGS.sync.lower() in ("1", "true", "yes", "sync")
    has_chief = "chief" in config["cluster"]
    is_chief = job == "chief" or (not has_chief and index == 0)
    num_workers = len(config["cluster"].get("worker", [])) + (1 if has_chief else 0)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:{job}/task:{index}", cluster=cluster)):
        images, labels, x, y, train_op, hooks = build(num_workers, is_chief, sync)
    rng = np.random.default_rng(index)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           checkpoint_dir=FLAGS.checkpoint_dir,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            chosen = rng.integers(0, len(labels), FLAGS.batch_size)
            sess.run(train_op, feed_dict={x: images[chosen], y: labels[chosen]})
    print(f"{job} {index}: training finished")


if __name__ == "__main__":
    app.run(main)
