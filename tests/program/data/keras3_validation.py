"""A Keras 3 program as users write one for a cluster described by ``TF_CONFIG``: the ps
serves, the worker trains alone on MNIST-shaped data with ``model.fit(...,
validation_data=...)`` (each epoch's line ends with validation figures, drawn once its
held-out set has been run through) and a bar per epoch, as Keras prints it by default."""

import json
import os

import numpy as np
import tensorflow as tf

config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
if task["type"] == "ps":
    tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]), job_name="ps",
                         task_index=task["index"]).join()
else:
    rng = np.random.default_rng(0)
    x = rng.random(size=(15120, 784), dtype=np.float32)
    y = rng.integers(0, 10, size=15120)
    model = tf.keras.Sequential([tf.keras.Input((784,)), tf.keras.layers.Dense(1024, activation="relu"),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x[:5120], y[:5120], validation_data=(x[5120:], y[5120:]), epochs=3, batch_size=256)
