"""Synchronous training over two ps: ``SyncReplicasOptimizer`` around Adam (two slots per
variable), an embedding split by ``fixed_size_partitioner``, ``MonitoredTrainingSession`` with
the sync hook, roles from ``TF_CONFIG``."""

import json
import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
config = json.loads(os.environ["TF_CONFIG"])
cluster = tf1.train.ClusterSpec(config["cluster"])
job, index = config["task"]["type"], config["task"]["index"]
server = tf1.train.Server(cluster, job_name=job, task_index=index)
if job == "ps":
    server.join()
    sys.exit(0)
workers = cluster.num_tasks("worker")
with tf1.device(tf1.train.replica_device_setter(cluster=cluster,
                                                worker_device=f"/job:worker/task:{index}")):
    global_step = tf1.train.get_or_create_global_step()
    ids = tf1.placeholder(tf.int64, [None])
    labels = tf1.placeholder(tf.float32, [None])
    with tf1.variable_scope("emb", partitioner=tf1.fixed_size_partitioner(2)):
        table = tf1.get_variable("table", [2000, 16])
    logits = tf.reduce_sum(tf.nn.embedding_lookup(table, ids), axis=1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    optimizer = tf1.train.SyncReplicasOptimizer(tf1.train.AdamOptimizer(0.01),
                                                replicas_to_aggregate=workers, total_num_replicas=workers)
    train_op = optimizer.minimize(loss, global_step=global_step)
hooks = [optimizer.make_session_run_hook(index == 0), tf1.train.StopAtStepHook(last_step=steps)]
rng = np.random.default_rng(index)
with tf1.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0, hooks=hooks,
                                        save_checkpoint_secs=None, save_summaries_steps=None,
                                        log_step_count_steps=None) as session:
    while not session.should_stop():
        batch = rng.integers(0, 2000, 64)
        session.run(train_op, {ids: batch, labels: (batch % 2).astype("float32")})
print(f"worker {index} done", flush=True)
