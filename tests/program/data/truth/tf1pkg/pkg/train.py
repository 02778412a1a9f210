"""TF1 between-graph training run as a package (``python -m pkg.train``): roles from flags,
``replica_device_setter`` over the ps, an embedding split by ``fixed_size_partitioner``,
``MonitoredTrainingSession`` with a ``StopAtStepHook``. Worker 0 is the chief; it prints
``step N loss X accuracy Y`` now and then and its own truth at the end: the global steps and
the cluster's examples/s it saw (global steps x batch over its time)."""

import argparse
import sys
import time

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

parser = argparse.ArgumentParser()
parser.add_argument("--job_name", required=True)
parser.add_argument("--task_index", type=int, required=True)
parser.add_argument("--ps_hosts", required=True)
parser.add_argument("--worker_hosts", required=True)
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--batch_size", type=int, default=64)
args = parser.parse_args()

cluster = tf1.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
server = tf1.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
if args.job_name == "ps":
    server.join()
    sys.exit(0)

chief = args.task_index == 0
with tf1.device(tf1.train.replica_device_setter(cluster=cluster,
                                                worker_device=f"/job:worker/task:{args.task_index}")):
    global_step = tf1.train.get_or_create_global_step()
    ids = tf1.placeholder(tf.int64, [None])
    labels = tf1.placeholder(tf.float32, [None])
    with tf1.variable_scope("emb", partitioner=tf1.fixed_size_partitioner(len(args.ps_hosts.split(",")))):
        table = tf1.get_variable("table", [20000, 16])
    logits = tf.reduce_sum(tf.nn.embedding_lookup(table, ids), axis=1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    correct = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), labels), tf.float32))
    train_op = tf1.train.AdagradOptimizer(0.5).minimize(loss, global_step=global_step)

rng = np.random.default_rng(args.task_index)
hooks = [tf1.train.StopAtStepHook(last_step=args.steps)]
start = None
local = 0
with tf1.train.MonitoredTrainingSession(master=server.target, is_chief=chief, hooks=hooks,
                                        save_checkpoint_secs=None, save_summaries_steps=None,
                                        log_step_count_steps=None) as session:
    while not session.should_stop():
        batch = rng.integers(0, 20000, args.batch_size)
        _, step, value, accuracy = session.run([train_op, global_step, loss, correct],
                                               {ids: batch, labels: (batch % 2).astype("float32")})
        local += 1
        if start is None:
            start = (time.time(), step)
        last = (time.time(), step)
        if chief and local % 50 == 0:
            print(f"step {step} loss {value:.4f} accuracy {accuracy:.4f}", flush=True)
if chief and start is not None:
    rate = (last[1] - start[1]) * args.batch_size / (last[0] - start[0]) if last[0] > start[0] else 0.0
    print(f"truth: global steps {last[1]} examples/s {rate:.1f} accuracy {accuracy:.4f} "
          f"window {start[0]:.3f} {last[0]:.3f}", flush=True)
