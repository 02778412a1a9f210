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

With ``--check``, the step anatomy the trainer reports (:mod:`trainer.anatomy`: one step in
:data:`trainer.anatomy.MIN_EVERY` sampled) is checked against a full trace of the same
steps: every step of a window traced, each turned into TensorFlow's own Chrome trace
(``tensorflow.python.client.timeline``), whose events give each part's share of the step
(the union of its events' time on the worker's and the ps's lanes). The sampled anatomy's
mean shares against the trace's, per part, in points of the step.

    python -m bench.training.step_profile [--model mlp] [--steps 200] [--fuse true|false]
        [--check]
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

#: At its default size, on 2 cores (with ``--check``: half a minute more).
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


def profile(model: str, steps: int, fuse: bool = True, check: bool = False) -> dict[str, Any]:
    """The breakdown: per-category op milliseconds per step, step and Python times (and,
    ``check``, the anatomy against a full trace: :func:`check_anatomy`)."""
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
        checked = check_anatomy(tf, sess, fetches, steps) if check else None
    finally:
        ps.kill()
        ps.wait()
    return {"model": model, "step_ms": wall / steps * 1000, "in_run_ms": in_run / steps * 1000,
            "python_ms": (wall - in_run) / steps * 1000,
            "ops_ms": {c: totals[c] / traced for c in CATEGORIES}, "check": checked}


#: The parts both sides give a share of the step (reads and pushes summed over the ps).
CHECKED_PARTS = ("compute", "input", "read", "push", "rest")


def check_anatomy(tf: Any, sess: Any, fetches: list[Any], steps: int) -> dict[str, Any]:
    """Trace each of ``steps`` steps in full: per part, the mean share of the step in the
    anatomy of the steps the trainer would sample (one in ``MIN_EVERY``), in the anatomy of
    every step, and in the Chrome trace of every step; the largest gap between the sampled
    anatomy and the trace, in points of the step."""
    from tensorflow.python.client import timeline

    from trainer import anatomy

    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    mine: list[dict[str, float]] = []
    traced: list[dict[str, float]] = []
    for k in range(steps):
        metadata = tf.RunMetadata()
        began = time.time()
        sess.run(fetches, options=options, run_metadata=metadata)
        ended = time.time()
        event = anatomy.anatomy(metadata, worker=0, num_ps=1, sync=False, start=began, end=ended,
                                global_step=k, local_step=k + 1, sampler=anatomy.Sampler())
        mine.append({part: sum(p.share for p in event.parts if p.part == part)
                     for part in CHECKED_PARTS})
        trace = json.loads(timeline.Timeline(metadata.step_stats).generate_chrome_trace_format())
        traced.append(trace_shares(trace, began * 1e6, ended * 1e6))
    sampled = mine[anatomy.MIN_EVERY - 1::anatomy.MIN_EVERY] or mine[-1:]

    def mean(rows: list[dict[str, float]]) -> dict[str, float]:
        return {part: sum(r[part] for r in rows) / len(rows) for part in CHECKED_PARTS}

    chosen, trace = mean(sampled), mean(traced)
    return {"steps": steps, "sampled": len(sampled), "anatomy_sampled": chosen,
            "anatomy_all": mean(mine), "trace_all": trace,
            "max_gap": max(abs(chosen[p] - trace[p]) for p in CHECKED_PARTS)}


def trace_shares(trace: dict[str, Any], start: float, end: float) -> dict[str, float]:
    """Each part's share of the step ``[start, end]`` (microseconds) in a Chrome trace of it:
    on the worker's lanes a ``RecvTensor`` is a read, ``IteratorGetNext`` input, any other
    op but constants and no-ops compute; on the ps's lanes every such op (the gradient's
    receipt and its apply) is the push. Each part is the union of its events' time, so
    parts that overlap both count it; ``rest`` is what no event covers."""
    lanes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in trace["traceEvents"]:
        lane = lanes.get(e.get("pid"), "")
        if e.get("ph") != "X" or "Compute" not in lane or e["name"] in ("Const", "NoOp"):
            continue
        if "/job:ps" in lane:
            part = "push"
        elif e["name"] == "RecvTensor":
            part = "read"
        else:
            part = "input" if "IteratorGetNext" in e["name"] else "compute"
        lo, hi = max(float(e["ts"]), start), min(float(e["ts"]) + float(e["dur"]), end)
        if hi > lo:
            spans[part].append((lo, hi))
    step = max(end - start, 1e-9)
    shares = {part: _union(spans[part]) / step for part in CHECKED_PARTS if part != "rest"}
    shares["rest"] = 1.0 - _union([s for found in spans.values() for s in found]) / step
    return shares


def _union(spans: list[tuple[float, float]]) -> float:
    """The time covered by ``spans``, overlaps counted once."""
    covered, reach = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        if hi > reach:
            covered += hi - max(lo, reach)
            reach = hi
    return covered


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
    parser.add_argument("--check", action="store_true",
                        help="check the step anatomy's shares against a full trace of the same steps")
    args = parser.parse_args(argv)
    result = profile(args.model, args.steps, args.fuse == "true", args.check)
    result["solo_step_ms"] = solo_step_ms(args.model, args.steps)
    print(f"fuse {args.fuse}, model {result['model']}: step {result['step_ms']:.2f} ms (session.run "
          f"{result['in_run_ms']:.2f} ms, Python around it incl. event writing "
          f"{result['python_ms']:.3f} ms); alone without a ps: {result['solo_step_ms']:.2f} ms")
    for name, ms in result["ops_ms"].items():
        print(f"  {name:34s} {ms:8.2f} ms of op time per step")
    if result["check"] is not None:
        print_check(result["check"])
    return 0


def print_check(check: dict[str, Any]) -> None:
    """The anatomy against the full trace, a line per part, shares in % of the step."""
    print(f"step anatomy against a full trace of the same {check['steps']} steps (each traced; "
          f"the anatomy sampled {check['sampled']} of them, one in each window):")
    print(f"  {'part':8s} {'anatomy, sampled':>17s} {'anatomy, every step':>20s} "
          f"{'Chrome trace, every step':>25s}")
    for part in CHECKED_PARTS:
        print(f"  {part:8s} {check['anatomy_sampled'][part]:17.1%} {check['anatomy_all'][part]:20.1%} "
              f"{check['trace_all'][part]:25.1%}")
    verdict = "within" if check["max_gap"] <= 0.10 else "NOT within"
    print(f"  largest gap, sampled anatomy against the trace: {check['max_gap'] * 100:.1f} points "
          f"of the step ({verdict} the 10-point floor)")


if __name__ == "__main__":
    sys.exit(main())
