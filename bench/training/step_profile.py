"""Where one worker's training step goes: a 1 ps + 1 worker cluster of real gRPC servers
(the ps in a child process, the worker here, built by trainer.graph as a worker builds it),
traced with TensorFlow's step stats for ``--steps`` steps, against the same model trained
in this process without a ps.

Op time is summed per category, on the device that ran it: variable reads (the worker
receiving variables from the ps), gradient pushes (the ps receiving gradients), the apply
and global-step update on the ps, the input pipeline, the model's own compute, and the
rest. Ops run in parallel, so categories can add up to more than the step; the step's wall
time and what Python spends around ``session.run`` (the trainer's event writing) are shown
beside them.

    python -m bench.training.step_profile [--model mlp] [--steps 200] [--fuse true|false]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

from trainer import data as datasets
from trainer import protocol
from trainer.cluster import Cluster
from trainer.graph import build
from trainer.lifecycle import emit
from trainer.loop import server_config
from trainer.settings import TrainingSettings
from tui.launch.local.ports import reserve_free_ports

#: At its default size, on 2 cores.
RUN_TIME = "about 2 min"

CATEGORIES = ("variable reads (worker <- ps)", "gradient pushes (ps <- worker)",
              "apply gradients (ps)", "global step update (ps)", "input pipeline (worker)",
              "model compute (worker)", "other")


def category(device: str, node: str, op: str) -> str:
    """Which part of the step an op (from step stats) belongs to."""
    on_ps = "/job:ps" in device
    if op in ("_Recv", "_HostRecv", "RecvTensor") or node.startswith("_recv") or "_Recv" in node:
        return CATEGORIES[1] if on_ps else CATEGORIES[0]
    if on_ps and ("Apply" in op or "apply" in node.lower()):
        return CATEGORIES[2]
    if on_ps and op in ("AssignAdd", "AssignAddVariableOp"):
        return CATEGORIES[3]
    if "Iterator" in op:
        return CATEGORIES[4]
    if not on_ps and op not in ("_Send", "_HostSend", "NoOp", "Const", "Identity"):
        return CATEGORIES[5]
    return CATEGORIES[6]


def start_ps(cluster: Cluster) -> subprocess.Popen[bytes]:
    """The ps task, as the controller starts it (``python -m trainer``)."""
    tf_config = json.dumps({"cluster": cluster.spec(), "task": {"type": "ps", "index": 0}})
    return subprocess.Popen([sys.executable, "-m", "trainer", "--watch-stdin", "yes"],
                            env={**os.environ, "TF_CONFIG": tf_config}, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile(model: str, steps: int, fuse: bool = True) -> dict[str, Any]:
    """The breakdown: per-category op milliseconds per step, step and Python times."""
    from trainer.tfimport import import_tf

    tf = import_tf()
    settings = TrainingSettings().replace(model=model, dataset="digits" if model == "mlp" else "synthetic",
                                           fuse=fuse)
    reservations = reserve_free_ports(2)
    cluster = Cluster((f"localhost:{reservations[0].port}",), (f"localhost:{reservations[1].port}",))
    for reservation in reservations:
        reservation.release()
    ps = start_ps(cluster)
    try:
        from trainer.cluster import Role

        role = Role("worker", 0)
        loaded = datasets.load(settings)
        graph = build(tf, settings, cluster, 0, datasets.input_shape(settings))
        server = tf.train.Server(tf.train.ClusterSpec(cluster.spec()), job_name="worker", task_index=0,
                                 config=server_config(tf, role), start=True)
        sess = tf.Session(server.target, graph=graph.graph, config=server_config(tf, role))
        sess.run(graph.init_op)
        sess.run(graph.local_init_op)
        sess.run(graph.iterator_init, feed_dict={graph.x_feed: loaded.train.images,
                                                 graph.y_feed: loaded.train.labels})
        fetches = graph.fetches()
        for _ in range(20):
            sess.run(fetches)
        # Untraced: the step as the trainer runs it, and the event writing around it.
        devnull = open(os.devnull, "w")  # noqa: SIM115  # closed below
        real_stdout, sys.stdout = sys.stdout, devnull
        in_run = 0.0
        started = time.perf_counter()
        try:
            for k in range(steps):
                before = time.perf_counter()
                step, loss, *_ = sess.run(fetches)
                in_run += time.perf_counter() - before
                if k % 10 == 0:
                    emit(protocol.Step(role="worker", index=0, global_step=int(step), local_step=k,
                                       loss=float(loss), examples_per_sec=0.0, step_time=0.0))
        finally:
            sys.stdout = real_stdout
            devnull.close()
        wall = time.perf_counter() - started
        # Traced: where the ops' time goes.
        totals: dict[str, float] = defaultdict(float)
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        traced = max(20, steps // 5)
        for _ in range(traced):
            metadata = tf.RunMetadata()
            sess.run(fetches, options=options, run_metadata=metadata)
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    op = node.timeline_label.split("=")[-1].split("(")[0].strip() if "=" in \
                        node.timeline_label else node.node_name
                    totals[category(device.device, node.node_name, op)] += node.all_end_rel_micros / 1000
    finally:
        ps.kill()
        ps.wait()
    return {"model": model, "step_ms": wall / steps * 1000, "in_run_ms": in_run / steps * 1000,
            "python_ms": (wall - in_run) / steps * 1000,
            "ops_ms": {c: totals[c] / traced for c in CATEGORIES}}


def solo_step_ms(model: str, steps: int) -> float:
    """Milliseconds per step of the same model trained alone (bench.training.solo), for scale."""
    done = subprocess.run([sys.executable, "-m", "bench.training.solo", "--seconds", "5", "--model", model,
                           "--dataset", "digits" if model == "mlp" else "synthetic"],
                          input=b"go\n", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    words = done.stdout.decode().split()
    count, seconds = int(words[-2]), float(words[-1])
    return seconds / count * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training.step_profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--fuse", default="true", choices=("true", "false"),
                        help="one transfer per ps each way a step (the trainer's fuse setting)")
    args = parser.parse_args(argv)
    result = profile(args.model, args.steps, args.fuse == "true")
    result["solo_step_ms"] = solo_step_ms(args.model, args.steps)
    print(f"fuse {args.fuse}, model {result['model']}: step {result['step_ms']:.2f} ms (session.run "
          f"{result['in_run_ms']:.2f} ms, Python around it incl. event writing "
          f"{result['python_ms']:.3f} ms); alone without a ps: {result['solo_step_ms']:.2f} ms")
    for name, ms in result["ops_ms"].items():
        print(f"  {name:34s} {ms:8.2f} ms of op time per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
