"""One side of :mod:`bench.training.round_trip`'s bare exchange: a ps serving one variable
of a model's size, or a worker timing ``session.run`` calls against it.

The worker builds, on the trainer's own server and session config
(:func:`trainer.loop.server_config`, the thread pools the environment names), four runs:

- ``direct``: a local op in a plain local session (no server): what a single process pays
  per ``session.run``;
- ``local``: the same op in the distributed session (the master, the worker's own partition);
- ``read``: the ps's variable read onto the worker;
- ``exchange``: read, and a tensor of the same size computed from it pushed back and added to
  the variable on the ps, as a fused async step moves its parameters and gradient.

It prints ``warm`` once each run has been made a few times, then for each line ``RUN SECONDS``
on stdin makes that run for ``SECONDS`` and prints ``result RUN COUNT SECONDS CPU_SECONDS`` (this
process's CPU time); ``quit`` (or the end of stdin) ends it. The ps serves until it is killed.

    python -m bench.training.exchange_task --job ps|worker --ports P,W --floats N [--callable]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from trainer import threads
from trainer.cluster import Cluster, Role
from trainer.loop import STEP_DEADLINE_SECS, server_config
from trainer.step_faults import DUPLICATE_SIGNS
from trainer.tfimport import import_tf

RUNS = ("direct", "local", "read", "exchange")
WARMUP_RUNS = 50


def _runner(tf: Any, sess: Any, fetch: Any, use_callable: bool, handler_pool: bool) -> Callable[[], Any]:
    """One run of ``fetch`` with the options an async trainer step carries (its deadline);
    through ``Session.make_callable`` when ``use_callable``; on the run-handler pool when
    ``handler_pool``."""
    options = tf.RunOptions(timeout_in_ms=round(STEP_DEADLINE_SECS * 1000))
    if handler_pool:
        options.experimental.use_run_handler_pool = True
    if use_callable:
        call = sess.make_callable(fetch, accept_options=True)
        once: Callable[[], Any] = lambda: call(options=options)  # noqa: E731
    else:
        once = lambda: sess.run(fetch, options=options)  # noqa: E731

    def run() -> Any:
        # TensorFlow's gRPC now and then delivers a RunGraph twice and refuses the second
        # (the trainer's steps retry it too, trainer.step_faults): one more run, as they do.
        try:
            return once()
        except tf.errors.AbortedError as exc:
            if not any(sign in str(exc) for sign in DUPLICATE_SIGNS):
                raise
            return once()
    return run


def config_for(tf: Any, role: Role, no_spin: bool) -> Any:
    """The trainer's server and session config; its pools' threads sleep at once when out of
    work when ``no_spin``."""
    config = server_config(tf, role)
    if no_spin:
        config.experimental.disable_thread_spinning = True
    return config


def worker(tf: Any, cluster: Cluster, floats: int, use_callable: bool, handler_pool: bool,
           no_spin: bool) -> None:
    role = Role("worker", 0)
    server = tf.train.Server(tf.train.ClusterSpec(cluster.spec()), job_name="worker", task_index=0,
                             config=config_for(tf, role, no_spin), start=True)
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            shared = tf.get_variable("shared", shape=[floats], initializer=tf.zeros_initializer())
        with tf.device("/job:worker/task:0"):
            local = tf.get_variable("local", shape=[floats], initializer=tf.zeros_initializer())
            local_op = local.assign_add(tf.ones([floats])).op
            received = tf.identity(shared.read_value()) * 0.5
        with tf.device("/job:ps/task:0"):
            exchange_op = shared.assign_add(received).op
        init = tf.global_variables_initializer()
    sess = tf.Session(server.target, graph=graph, config=config_for(tf, role, no_spin))
    sess.run(init)
    direct_graph = tf.Graph()
    with direct_graph.as_default():
        alone = tf.get_variable("local", shape=[floats], initializer=tf.zeros_initializer())
        alone_op = alone.assign_add(tf.ones([floats])).op
        alone_init = tf.global_variables_initializer()
    config = tf.ConfigProto()
    config.CopyFrom(config_for(tf, role, no_spin))
    config.ClearField("device_filters")
    direct = tf.Session(graph=direct_graph, config=config)
    direct.run(alone_init)
    runners = {"direct": _runner(tf, direct, alone_op, use_callable, handler_pool),
               "local": _runner(tf, sess, local_op, use_callable, handler_pool),
               "read": _runner(tf, sess, received, use_callable, handler_pool),
               "exchange": _runner(tf, sess, exchange_op, use_callable, handler_pool)}
    for run in runners.values():
        for _ in range(WARMUP_RUNS):
            run()
    print("warm", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        name, seconds = words[0], float(words[1])
        run = runners[name]
        count, start, cpu = 0, time.monotonic(), time.process_time()
        while time.monotonic() - start < seconds:
            run()
            count += 1
        print(f"result {name} {count} {time.monotonic() - start:.6f} {time.process_time() - cpu:.6f}",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training.exchange_task")
    parser.add_argument("--job", choices=("ps", "worker"), required=True)
    parser.add_argument("--ports", required=True, help="the ps's port,the worker's port")
    parser.add_argument("--floats", type=int, required=True)
    parser.add_argument("--callable", action="store_true", help="runs through Session.make_callable")
    parser.add_argument("--handler-pool", action="store_true", help="RunOptions' run-handler pool")
    parser.add_argument("--no-spin", action="store_true", help="ConfigProto's disable_thread_spinning")
    args = parser.parse_args(argv)
    ps_port, worker_port = args.ports.split(",")
    cluster = Cluster((f"localhost:{ps_port}",), (f"localhost:{worker_port}",))
    threads.pin(threads.from_env())  # as the trainer does, before TensorFlow starts a thread
    tf = import_tf()
    if args.job == "ps":
        role = Role("ps", 0)
        server = tf.train.Server(tf.train.ClusterSpec(cluster.spec()), job_name="ps", task_index=0,
                                 config=config_for(tf, role, args.no_spin), start=True)
        print("warm", flush=True)
        server.join()
        return 0
    worker(tf, cluster, args.floats, args.callable, args.handler_pool, args.no_spin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
