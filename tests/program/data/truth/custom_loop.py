"""A TF2 custom training loop under ParameterServerStrategy: a 500k x 32 embedding sharded
over the ps by ``MinSizePartitioner``, Keras 2's Adagrad (``tf_keras``), the coordinator
scheduling one batch a function. Roles from ``TF_CONFIG``. The chief prints
``step N loss X accuracy Y`` every ``--log-every`` steps and its own truth at the end.

    python custom_loop.py --steps 200 --batch-size 128
"""

import argparse
import os
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import numpy as np
import tensorflow as tf
import tf_keras as keras

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--vocabulary", type=int, default=500_000)
parser.add_argument("--log-every", type=int, default=20)
args = parser.parse_args()

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if resolver.task_type in ("worker", "ps"):
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    server.join()
    raise SystemExit(0)

num_ps = len(resolver.cluster_spec().as_dict().get("ps", []))
partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
    min_shard_bytes=256 << 10, max_shards=num_ps)
strategy = tf.distribute.experimental.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    user_emb = keras.layers.Embedding(args.vocabulary, 32, name="user_emb")
    dense = keras.layers.Dense(1, name="logit")
    optimizer = keras.optimizers.Adagrad(0.5)
    user_emb.build((None,))
    dense.build((None, 32))
    accuracy = keras.metrics.BinaryAccuracy()


def dataset_fn() -> tf.data.Dataset:
    ids = tf.data.Dataset.random(seed=0).map(
        lambda x: tf.math.floormod(x, args.vocabulary))
    return ids.map(lambda i: (i, tf.cast(tf.math.floormod(i, 2), tf.float32))).batch(args.batch_size)


@tf.function
def step_fn(iterator):
    def replica(ids, labels):
        with tf.GradientTape() as tape:
            logits = tf.squeeze(dense(user_emb(ids)), -1)
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, logits))
        variables = user_emb.trainable_variables + dense.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        accuracy.update_state(labels, tf.sigmoid(logits))
        return loss

    return strategy.run(replica, args=next(iterator))


iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
losses = []
start = None
for step in range(1, args.steps + 1):
    losses.append(coordinator.schedule(step_fn, args=(iterator,)))
    if step % args.log_every == 0 or step == args.steps:
        coordinator.join()
        if start is None:  # from the first join on: tracing is behind us
            start = (time.time(), step)
        loss = float(np.mean([value.fetch() for value in losses]))
        losses.clear()
        print(f"step {step} loss {loss:.4f} accuracy {float(accuracy.result()):.4f}", flush=True)
end = time.time()
rate = (args.steps - start[1]) * args.batch_size / (end - start[0]) if end > start[0] else 0.0
print(f"truth: steps {int(optimizer.iterations.numpy())} examples/s {rate:.1f} "
      f"accuracy {float(accuracy.result()):.4f} window {start[0]:.3f} {end:.3f}", flush=True)
for variable in user_emb.variables:
    print("placement:", [(v.name, v.device) for v in getattr(variable, "variables", [variable])], flush=True)
