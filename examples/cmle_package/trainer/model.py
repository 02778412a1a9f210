"""The model: a small softmax classifier on synthetic data, TF1 graph style."""

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
FEATURES, CLASSES = 32, 4


def input_batch(batch_size: int, seed: int) -> tuple[tf.Tensor, tf.Tensor]:
    """A batch of separable synthetic examples, drawn in the graph at every step."""
    centers = np.random.default_rng(0).normal(size=(CLASSES, FEATURES)).astype("float32")
    labels = tf1.random.uniform([batch_size], 0, CLASSES, dtype=tf.int64, seed=seed)
    noise = tf1.random.normal([batch_size, FEATURES], seed=seed + 1)
    return tf.gather(tf.constant(centers), labels) + noise, labels


def build(features: tf.Tensor, labels: tf.Tensor, learning_rate: float) -> tuple[tf.Tensor, tf.Operation]:
    """Logits, loss and a train op that advances the global step."""
    weights = tf1.get_variable("softmax/weights", [FEATURES, CLASSES])
    biases = tf1.get_variable("softmax/biases", [CLASSES], initializer=tf1.zeros_initializer())
    logits = tf.matmul(features, weights) + biases
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    optimizer = tf1.train.AdagradOptimizer(learning_rate)
    train_op = optimizer.minimize(loss, global_step=tf1.train.get_or_create_global_step())
    return loss, train_op
