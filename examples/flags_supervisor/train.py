"""Between-graph replicated training in the style of the TensorFlow 1.x tutorials
(``mnist_replica.py``): flags for the cluster, ``tf.train.Server``, ``replica_device_setter``
and a ``tf.train.Supervisor``. A small MLP on scikit-learn's digits (offline).

Run by hand, one terminal per task:

    python train.py --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224 \\
        --job_name=ps --task_index=0
    python train.py ... --job_name=worker --task_index=0      # the chief
    python train.py ... --job_name=worker --task_index=1

Nothing here knows about tfdist-tui. It has the usual pains of such programs: the ps calls
``server.join()`` and never exits, a non-chief that starts before the chief has initialised
the model sleeps 30 s before it looks again, and with ``--sync_replicas`` the chief can wait
a long time at the end for gradients of a worker that has already left.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf
from sklearn.datasets import load_digits


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps_hosts", required=True, help="comma-separated host:port pairs")
    parser.add_argument("--worker_hosts", required=True, help="comma-separated host:port pairs")
    parser.add_argument("--job_name", required=True, choices=["ps", "worker"])
    parser.add_argument("--task_index", type=int, default=0)
    parser.add_argument("--train_steps", type=int, default=1000, help="global steps")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--hidden_units", type=int, default=128)
    parser.add_argument("--sync_replicas", default="false",
                        help="true: aggregate the workers' gradients (SyncReplicasOptimizer)")
    parser.add_argument("--partitions", type=int, default=1,
                        help="split the hidden layer's weights into N shards across the ps")
    parser.add_argument("--logdir", default=None, help="checkpoints and summaries (optional)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    sync = args.sync_replicas.lower() in ("1", "true", "yes", "sync")
    ps_hosts = args.ps_hosts.split(",")
    worker_hosts = args.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)

    if args.job_name == "ps":
        server.join()
        return

    tf.disable_eager_execution()
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    num_workers = len(worker_hosts)
    is_chief = args.task_index == 0

    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 64], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        partitioner = (tf.fixed_size_partitioner(args.partitions)
                       if args.partitions > 1 else None)
        with tf.variable_scope("hidden", partitioner=partitioner):
            w1 = tf.get_variable("weights", [64, args.hidden_units],
                                 initializer=tf.truncated_normal_initializer(stddev=0.1))
            b1 = tf.get_variable("biases", [args.hidden_units],
                                 initializer=tf.zeros_initializer())
        with tf.variable_scope("softmax"):
            w2 = tf.get_variable("weights", [args.hidden_units, 10],
                                 initializer=tf.truncated_normal_initializer(stddev=0.1))
            b2 = tf.get_variable("biases", [10], initializer=tf.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
        logits = tf.matmul(hidden, w2) + b2
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))

        opt = tf.train.GradientDescentOptimizer(args.learning_rate)
        if sync:
            opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=num_workers,
                                                 total_num_replicas=num_workers,
                                                 name="sync_replicas")
        train_op = opt.minimize(loss, global_step=global_step)
        if sync:
            chief_queue_runner = opt.get_chief_queue_runner()
            init_tokens_op = opt.get_init_tokens_op()
        init_op = tf.global_variables_initializer()

    sv = tf.train.Supervisor(is_chief=is_chief, logdir=args.logdir, init_op=init_op,
                             recovery_wait_secs=30, global_step=global_step,
                             save_model_secs=60 if args.logdir else 0)
    config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)
    if is_chief:
        print(f"Worker {args.task_index}: initializing the session")
    else:
        print(f"Worker {args.task_index}: waiting for the chief to initialize the session")
    sess = sv.prepare_or_wait_for_session(server.target, config=config)
    print(f"Worker {args.task_index}: session ready")
    if sync and is_chief:
        sv.start_queue_runners(sess, [chief_queue_runner])
        sess.run(init_tokens_op)

    rng = np.random.default_rng(args.task_index)
    start = time.time()
    local_step = 0
    step = 0
    try:
        while not sv.should_stop() and step < args.train_steps:
            chosen = rng.integers(0, len(labels), args.batch_size)
            _, step, loss_value = sess.run([train_op, global_step, loss],
                                           feed_dict={x: images[chosen], y: labels[chosen]})
            local_step += 1
            if local_step % 100 == 0:
                print(f"Worker {args.task_index}: step {local_step} done "
                      f"(global step: {step}), loss {loss_value:.4f}")
    except tf.errors.OutOfRangeError:
        # Sync mode: the step read with the last update can be the one before it, so a
        # non-chief may start one more step and wait for a token; the chief's sv.stop()
        # closes the token queue under it. Training is over, not failed.
        if not (sync and not is_chief):
            raise
        print(f"Worker {args.task_index}: the chief closed the sync token queue")
    elapsed = time.time() - start
    print(f"Worker {args.task_index}: training finished in {elapsed:.1f} s")
    final = sess.run(accuracy, feed_dict={x: images, y: labels})
    print(f"Worker {args.task_index}: accuracy {final:.3f} after global step {step}")
    sv.stop()


if __name__ == "__main__":
    main()
