"""A TF2 program as users write one: it fetches its data set with Keras' ``get_file`` before
anything else, here from a port where nothing listens (a machine without network fails the
same way), and dies of the bare ``Exception`` Keras raises for a failed download."""

import numpy as np
import tensorflow as tf

path = tf.keras.utils.get_file("digits.npz", origin="http://127.0.0.1:9/digits.npz", cache_dir=".")
with np.load(path) as data:
    print(data["x_train"].shape)
