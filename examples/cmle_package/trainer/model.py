"""The model: a small softmax classifier on synthetic data, TF1 graph style."""

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
FEATURES, CLASSES = 32, 4


def input_batch(batch_size, seed):
    """An endless stream of separable synthetic examples, as tensors."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(CLASSES, FEATURES)).astype("float32")

    def generate():
        while True:
            labels = rng.integers(0, CLASSES, batch_size)
            yield centers[labels] + rng.normal(size=(batch_size, FEATURES)).astype("float32"), labels

    data = tf.data.Dataset.from_generator(
        generate, output_signature=(tf.TensorSpec([batch_size, FEATURES], tf.float32),
                                    tf.TensorSpec([batch_size], tf.int64)))
    return tf1.data.make_one_shot_iterator(data).get_next()


def build(features, labels, learning_rate):
    """Logits, loss and a train op that advances the global step."""
    weights = tf1.get_variable("softmax/weights", [FEATURES, CLASSES])
    biases = tf1.get_variable("softmax/biases", [CLASSES], initializer=tf1.zeros_initializer())
    logits = tf.matmul(features, weights) + biases
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    optimizer = tf1.train.AdagradOptimizer(learning_rate)
    train_op = optimizer.minimize(loss, global_step=tf1.train.get_or_create_global_step())
    return loss, train_op
