"""One process training a model alone, without a ps: the machine's compute limit for that
model when N of these run side by side (:mod:`bench.training.scaling`).

Same model, input pipeline and optimizer as a worker of the trainer (trainer.models,
trainer.graph), in a local session sized by the task's share (trainer.threads). Prints
``warm`` once past its warm-up steps, waits for a line on stdin (so that N processes
measure the same stretch of time), trains for ``--seconds``, prints ``result <steps>
<seconds>`` and exits.

    python -m bench.training.solo --seconds 10 -- <trainer flags, e.g. --model cnn>
"""

from __future__ import annotations

import argparse
import sys
import time

from bench.harness.window import DEFAULT_SECONDS, WARMUP_LOCAL_STEPS
from trainer import data as datasets
from trainer import placement, threads
from trainer import settings as settings_mod
from trainer.graph import make_optimizer
from trainer.models import MODELS, VariableMaker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training.solo")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    settings_mod.add_arguments(parser)
    args = parser.parse_args(argv)
    settings = settings_mod.from_namespace(args)
    threads.pin(threads.from_env())
    from trainer.tfimport import import_tf

    tf = import_tf()
    loaded = datasets.load(settings)
    shape = datasets.input_shape(settings)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(settings.seed)
        x_feed = tf.placeholder(tf.float32, [None, *shape])
        y_feed = tf.placeholder(tf.int64, [None])
        dataset = (tf.data.Dataset.from_tensor_slices((x_feed, y_feed)).shuffle(10_000, seed=settings.seed)
                   .repeat().batch(settings.batch_size, drop_remainder=True).prefetch(4))
        iterator = tf.data.make_initializable_iterator(dataset)
        images, labels = iterator.get_next()
        vm = VariableMaker(tf, settings.seed, placement.make_partitioner(tf, settings.partitions))
        logits = MODELS[settings.model](vm, images, True, settings.hidden_units)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        global_step = tf.train.get_or_create_global_step()
        train_op = make_optimizer(tf, settings).minimize(loss, global_step=global_step)
        init = tf.global_variables_initializer()
    config = tf.ConfigProto()
    threads.apply(config, threads.from_env())
    sess = tf.Session(graph=graph, config=config)
    sess.run(init)
    sess.run(iterator.initializer, feed_dict={x_feed: loaded.train.images, y_feed: loaded.train.labels})
    for _ in range(WARMUP_LOCAL_STEPS):
        sess.run([train_op, loss])
    print("warm", flush=True)
    sys.stdin.readline()
    steps, start = 0, time.monotonic()
    while time.monotonic() - start < args.seconds:
        sess.run([train_op, loss])  # the loss too, as a trainer worker fetches it
        steps += 1
    print(f"result {steps} {time.monotonic() - start:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
