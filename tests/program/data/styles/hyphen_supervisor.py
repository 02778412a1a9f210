"""A between-graph program as many were written for TF 1.x: hyphenated flags, a
``Supervisor``, and its own progress lines (``[worker 0] step 40 | global 75 | loss 0.41``)."""

import argparse
import time

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

parser = argparse.ArgumentParser()
parser.add_argument("--ps-hosts", required=True)
parser.add_argument("--worker-hosts", required=True)
parser.add_argument("--job-name", choices=["ps", "worker"], required=True)
parser.add_argument("--task-index", type=int, default=0)
parser.add_argument("--max-steps", type=int, default=500)
parser.add_argument("--print-every", type=int, default=25)
args = parser.parse_args()

cluster = tf1.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
server = tf1.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
if args.job_name == "ps":
    server.join()
else:
    rng = np.random.default_rng(args.task_index)
    with tf1.device(tf1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster)):
        step = tf1.train.get_or_create_global_step()
        x = tf1.placeholder(tf.float32, [None, 20])
        y = tf1.placeholder(tf.float32, [None, 1])
        w1 = tf1.get_variable("hidden/kernel", [20, 64])
        b1 = tf1.get_variable("hidden/bias", [64], initializer=tf1.zeros_initializer())
        w2 = tf1.get_variable("out/kernel", [64, 1])
        out = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2)
        loss = tf1.losses.mean_squared_error(y, out)
        train = tf1.train.MomentumOptimizer(0.01, 0.9).minimize(loss, global_step=step)
        init = tf1.global_variables_initializer()
    supervisor = tf1.train.Supervisor(is_chief=args.task_index == 0, init_op=init, global_step=step,
                                      logdir=None, summary_op=None, saver=None)
    true_w = np.linspace(-1, 1, 20, dtype="float32")[:, None]
    with supervisor.managed_session(server.target) as session:
        local, started = 0, time.time()
        while not supervisor.should_stop():
            batch = rng.normal(size=(32, 20)).astype("float32")
            _, value, global_step = session.run([train, loss, step], {x: batch, y: batch @ true_w})
            local += 1
            if local % args.print_every == 0:
                print(f"[worker {args.task_index}] step {local} | global {global_step} | "
                      f"loss {value:.3f} | {local / (time.time() - started):.1f} steps/s", flush=True)
            if global_step >= args.max_steps:
                break
    supervisor.stop()
    print(f"[worker {args.task_index}] finished after {local} local steps", flush=True)
