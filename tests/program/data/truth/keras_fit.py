"""Keras 2 ``model.fit`` under ParameterServerStrategy (the ``tf_keras`` package with
``TF_USE_LEGACY_KERAS=1``, as TensorFlow's PSS tutorial runs it), ``steps_per_execution``
batches per scheduled function, and a ``SidecarEvaluator`` task reading the chief's
checkpoints. Roles from ``TF_CONFIG``. The chief prints its own truth at the end (batches
trained, examples/s over the fit, training accuracy) for the tests to compare with.

    python keras_fit.py --epochs 2 --steps-per-epoch 50 --batch-size 64 --spe 10 --dir DIR
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import numpy as np
import tensorflow as tf
import tf_keras as keras

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--spe", type=int, default=10, help="steps_per_execution")
parser.add_argument("--dir", default="ckpt", help="checkpoints, shared with the evaluator")
parser.add_argument("--fail-evaluator", action="store_true", help="the evaluator exits 1 at once")
parser.add_argument("--linger", type=float, default=0.0,
                    help="seconds the chief waits after training, for the evaluator to catch up")
args = parser.parse_args()

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
rng = np.random.default_rng(0)
features = rng.random((2048, 16), dtype=np.float32)
labels = (features.sum(axis=1) > 8).astype(np.int64)


def build() -> keras.Model:
    model = keras.Sequential([keras.layers.Input((16,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.legacy.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=args.spe)
    return model


if resolver.task_type in ("worker", "ps"):
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    server.join()
elif resolver.task_type == "evaluator":
    if args.fail_evaluator:
        print("evaluator: giving up", file=sys.stderr)
        sys.exit(1)
    model = build()
    data = tf.data.Dataset.from_tensor_slices((features[:512], labels[:512])).batch(128)
    keras.utils.SidecarEvaluator(model, data, checkpoint_dir=args.dir, steps=4,
                                 max_evaluations=args.epochs).start()
else:
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = build()

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        data = tf.data.Dataset.from_tensor_slices((features, labels))
        return data.shuffle(2048, seed=0).repeat().batch(args.batch_size).prefetch(2)

    class Truth(keras.callbacks.Callback):
        """The program's own count: batches (optimizer iterations) and the time the epochs
        after the first took (the first one includes tracing)."""

        marks: list = []

        def on_epoch_end(self, epoch, logs=None):
            self.marks.append((time.time(), int(self.model.optimizer.iterations.numpy())))

    truth = Truth()
    checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(args.dir, "ckpt-{epoch}"),
                                                 save_weights_only=True)
    history = model.fit(keras.utils.experimental.DatasetCreator(dataset_fn), epochs=args.epochs,
                        steps_per_epoch=args.steps_per_epoch, callbacks=[truth, checkpoint], verbose=2)
    batches = int(model.optimizer.iterations.numpy())
    (t0, b0), (t1, b1) = truth.marks[0], truth.marks[-1]
    rate = (b1 - b0) * args.batch_size / (t1 - t0) if t1 > t0 else 0.0
    print(f"truth: batches {batches} examples/s {rate:.1f} accuracy {history.history['accuracy'][-1]:.4f} "
          f"window {t0:.3f} {t1:.3f}", flush=True)
    time.sleep(args.linger)
