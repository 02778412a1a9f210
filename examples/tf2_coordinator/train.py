"""A TF2 custom training loop on a parameter-server cluster, written the way TensorFlow's
guide writes it, with nothing of tfdist-tui in it: ``ParameterServerStrategy`` (variables on
the ps tasks, split by a ``FixedShardsPartitioner``), a ``ClusterCoordinator`` that schedules
each step on a free worker, momentum SGD (a slot variable per weight, on the ps too), and its
own progress lines.

Every task reads its role from ``TF_CONFIG``: the ``chief`` coordinates and returns when the
loop is done; ``worker`` and ``ps`` tasks start a server and serve until they are stopped.

    TF_CONFIG=... python train.py --steps 300 --batch 32
"""

import argparse
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf


def flags() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--report", type=int, default=50, help="print progress every N steps")
    return parser.parse_args()


class Regression(tf.Module):
    """Two dense layers; the weights and their momentum slots live on the ps tasks."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.w1 = tf.Variable(tf.random.normal([16, width], stddev=0.2, seed=1), name="w1")
        self.b1 = tf.Variable(tf.zeros([width]), name="b1")
        self.w2 = tf.Variable(tf.random.normal([width, 1], stddev=0.2, seed=2), name="w2")
        self.slots = [tf.Variable(tf.zeros_like(v), name=v.name.split(":")[0] + "_momentum",
                                  trainable=False) for v in (self.w1, self.b1, self.w2)]

    def parameters(self) -> tuple[list[tf.Variable], list[tf.Variable]]:
        """The weights and their slots, a ``ShardedVariable`` as its parts (what the tape
        differentiates)."""
        def parts(variables: list[tf.Variable]) -> list[tf.Variable]:
            return [part for v in variables for part in getattr(v, "variables", [v])]
        return parts([self.w1, self.b1, self.w2]), parts(self.slots)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.matmul(tf.nn.tanh(tf.matmul(x, self.w1) + self.b1), self.w2)


def main() -> None:
    args = flags()
    cluster = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if cluster.task_type in ("ps", "worker"):
        server = tf.distribute.Server(cluster.cluster_spec(), job_name=cluster.task_type,
                                      task_index=cluster.task_id, protocol="grpc", start=True)
        server.join()
        return

    num_ps = cluster.cluster_spec().num_tasks("ps")
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        cluster, variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(num_ps))
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = Regression(width=128)
    true_w = np.random.default_rng(0).normal(size=(16, 1)).astype("float32")

    def make_data() -> tf.data.Dataset:
        rng = np.random.default_rng(1)
        x = rng.normal(size=(4096, 16)).astype("float32")
        return tf.data.Dataset.from_tensor_slices((x, x @ true_w)).repeat().batch(args.batch)

    @tf.function
    def train_step(batches: Iterator[Any]) -> Any:
        def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            weights, slots = model.parameters()
            for weight, slot, grad in zip(weights, slots, tape.gradient(loss, weights), strict=True):
                slot.assign(args.momentum * slot + grad)
                weight.assign_sub(args.lr * slot)
            return loss

        x, y = next(batches)
        return strategy.run(step, args=(x, y))

    batches = iter(coordinator.create_per_worker_dataset(lambda: make_data()))
    started = time.time()
    losses: list[Any] = []
    for i in range(1, args.steps + 1):
        losses.append(coordinator.schedule(train_step, args=(batches,)))
        if i % args.report == 0 or i == args.steps:
            coordinator.join()
            print(f"[{time.time() - started:6.1f}s] {i}/{args.steps} steps, "
                  f"mse {np.mean([loss.fetch() for loss in losses]):.4f}", flush=True)
            losses = []
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
