"""TF1 between-graph training as users write it: roles from flags, ``replica_device_setter``
over the ps, a small MLP on random data fed through ``feed_dict``, ``MonitoredTrainingSession``
with a ``StopAtStepHook``, async. Each worker prints its own truth at the end: how many
training steps it ran itself (``own steps N``), which another worker's steps do not move."""

import argparse
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

parser = argparse.ArgumentParser()
parser.add_argument("--job_name", required=True)
parser.add_argument("--task_index", type=int, required=True)
parser.add_argument("--ps_hosts", required=True)
parser.add_argument("--worker_hosts", required=True)
parser.add_argument("--steps", type=int, default=600)
args = parser.parse_args()

cluster = tf1.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
server = tf1.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
if args.job_name == "ps":
    server.join()
    sys.exit(0)

with tf1.device(tf1.train.replica_device_setter(cluster=cluster,
                                                worker_device=f"/job:worker/task:{args.task_index}")):
    global_step = tf1.train.get_or_create_global_step()
    x = tf1.placeholder(tf.float32, [None, 64])
    y = tf1.placeholder(tf.int64, [None])
    w1 = tf1.get_variable("w1", [64, 128])
    w2 = tf1.get_variable("w2", [128, 10])
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)

rng = np.random.default_rng(args.task_index)
own = 0
with tf1.train.MonitoredTrainingSession(master=server.target, is_chief=args.task_index == 0,
                                        hooks=[tf1.train.StopAtStepHook(last_step=args.steps)],
                                        save_checkpoint_secs=None, save_summaries_steps=None,
                                        log_step_count_steps=None) as session:
    while not session.should_stop():
        images = rng.random((32, 64), dtype=np.float32)
        session.run([train_op, loss], {x: images, y: rng.integers(0, 10, 32)})
        own += 1
print(f"own steps {own}", flush=True)
