"""TF2 parameter-server training: ``ParameterServerStrategy`` with a ``ClusterCoordinator``
and a custom training loop (Keras 3's ``model.fit`` does not support this strategy).

Roles come from ``TF_CONFIG``, as TensorFlow defines it:

- ``chief``: the coordinator. It builds the variables (on the ps tasks, split into shards by
  a partitioner), schedules training steps on the workers and saves nothing else; when it
  returns, training is over.
- ``worker`` and ``ps``: plain ``tf.distribute.Server`` processes that serve until they are
  ended. Under tfdist-tui the controller ends them once the chief has exited 0; by hand you
  stop them yourself.

Progress is printed as TensorFlow's standard ``loss = X, step = N (T sec)`` lines, and the
variables' placement as ``placement: NAME SHAPE DEVICE`` lines. Under tfdist-tui the same
figures also go to its panes through ``tfdist_report`` (on the path of every task the
controller starts; without it, reporting does nothing).

    python train.py --steps 200 --batch-size 64 --learning-rate 0.1
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# Workers must not give up on a step whose worker died; the coordinator retries it elsewhere.
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

try:
    import tfdist_report as report
except ImportError:  # not under tfdist-tui: the printed lines are the only report
    report = None


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps to schedule")
    parser.add_argument("--batch-size", type=int, default=64, help="examples per step")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--hidden-units", type=int, default=64)
    parser.add_argument("--log-every", type=int, default=20, help="print progress every N steps")
    return parser.parse_args(argv)


def serve(resolver: tf.distribute.cluster_resolver.ClusterResolver) -> None:
    """A worker or ps: start a server in the cluster and serve until ended."""
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol=resolver.rpc_layer or "grpc",
                                  start=True)
    print(f"Started server with target: {server.target}", flush=True)
    server.join()


def load_data() -> tuple[np.ndarray, np.ndarray]:
    """The 8x8 digits that ship with scikit-learn (no download), else random data."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        rng = np.random.default_rng(0)
        return rng.random((1024, 64), dtype=np.float32), rng.integers(0, 10, 1024).astype(np.int64)
    digits = load_digits()
    return (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)


class Model(tf.Module):
    """A one-hidden-layer classifier made of plain variables, so the strategy places them."""

    def __init__(self, inputs: int, hidden: int, classes: int) -> None:
        super().__init__()
        init = tf.keras.initializers.GlorotUniform(seed=0)
        self.w1 = tf.Variable(init((inputs, hidden)), name="hidden/weights")
        self.b1 = tf.Variable(tf.zeros([hidden]), name="hidden/biases")
        self.w2 = tf.Variable(init((hidden, classes)), name="logits/weights")
        self.b2 = tf.Variable(tf.zeros([classes]), name="logits/biases")
        self.step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2


def describe_placement(model: Model) -> None:
    for variable in model.variables:
        shards = getattr(variable, "variables", [variable])  # a ShardedVariable's pieces
        for shard in shards:
            print(f"placement: {shard.name} {shard.shape.as_list()} {shard.device}", flush=True)
    if report is not None:
        report.placement(model.variables, model="mlp", strategy="ParameterServerStrategy")


def coordinate(resolver: tf.distribute.cluster_resolver.ClusterResolver, args: argparse.Namespace) -> None:
    """The chief: build the model on the ps tasks and run the training loop on the workers."""
    num_ps = len(resolver.cluster_spec().as_dict().get("ps", []))
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=4 << 10, max_shards=num_ps)
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    features, labels = load_data()

    with strategy.scope():
        model = Model(features.shape[1], args.hidden_units, 10)
    describe_placement(model)

    def dataset_fn() -> tf.data.Dataset:
        data = tf.data.Dataset.from_tensor_slices((features, labels))
        return data.shuffle(len(labels), seed=0).repeat().batch(args.batch_size).prefetch(2)

    @tf.function
    def step_fn(iterator: tf.types.experimental.distributed.DistributedIterator) -> tf.Tensor:
        def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
            variables = model.trainable_variables
            for variable, gradient in zip(variables, tape.gradient(loss, variables), strict=True):
                variable.assign_sub(args.learning_rate * gradient)
            model.step.assign_add(1)
            return loss

        x, y = next(iterator)
        return strategy.run(replica_step, args=(x, y))

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    start = last_time = time.monotonic()
    pending = []
    for step in range(1, args.steps + 1):
        pending.append(coordinator.schedule(step_fn, args=(iterator,)))
        if step % args.log_every == 0 or step == args.steps:
            coordinator.join()  # every scheduled step has run: the losses are final
            loss = float(np.mean([value.fetch() for value in pending]))
            steps_done = len(pending)
            pending.clear()
            now = time.monotonic()
            global_step = int(model.step.numpy())
            print(f"loss = {loss:.4f}, step = {global_step} ({now - last_time:.3f} sec)", flush=True)
            if report is not None:
                report.step(global_step, loss=loss, examples=args.batch_size * steps_done)
            last_time = now
    print(f"done: {int(model.step.numpy())} steps in {time.monotonic() - start:.1f} s", flush=True)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("worker", "ps"):
        serve(resolver)
        return 0
    if resolver.task_type != "chief":
        print(f"error: TF_CONFIG task type {resolver.task_type!r}: expected chief, worker or ps",
              file=sys.stderr)
        return 2
    coordinate(resolver, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
