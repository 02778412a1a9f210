"""The seed programs' models, built in graph mode from ``tf.compat.v1.get_variable``.

Every weight is created through :class:`VariableMaker`, whose initialiser generates the
*full* tensor from a seed derived from the variable's name and then slices out the shard
being created. Shards are therefore slices of one full tensor: the initial model is the same
whatever ``--partitions`` and ``--placement`` are."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

from trainer.settings import Model

Tensor = Any
ModelFn = Callable[["VariableMaker", Tensor, bool, int], Tensor]


class SliceOfFull:
    """A TF1 initialiser (it accepts ``partition_info``) producing a slice of a full tensor."""

    def __init__(self, tf: Any, seed: int, name: str, stddev: float | None, value: float = 0.0):
        self._tf = tf
        self._seed = [seed, zlib.crc32(name.encode()) & 0x7FFFFFFF]
        self._stddev = stddev
        self._value = value

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        tf = self._tf
        full_shape = list(partition_info.full_shape) if partition_info is not None else list(shape)
        if self._stddev is None:
            full = tf.fill(full_shape, self._value)
        else:
            full = tf.random.stateless_truncated_normal(full_shape, seed=self._seed,
                                                        stddev=self._stddev)
        if partition_info is not None:
            full = tf.slice(full, partition_info.var_offset, list(shape))
        return tf.cast(full, dtype or tf.float32)


class VariableMaker:
    """Creates model variables with the run's seed and partitioner."""

    def __init__(self, tf: Any, seed: int, partitioner: Any):
        self.tf = tf
        self.seed = seed
        self.partitioner = partitioner

    def weights(self, shape: list[int], stddev: float | None = None) -> Tensor:
        """A weight matrix or kernel; truncated normal, He-scaled unless ``stddev`` is given."""
        fan_in = math.prod(shape[:-1]) or 1
        std = stddev if stddev is not None else math.sqrt(2.0 / fan_in)
        return self._get("weights", shape, std, 0.0)

    def bias(self, shape: list[int], value: float = 0.0) -> Tensor:
        return self._get("biases", shape, None, value)

    def _get(self, name: str, shape: list[int], stddev: float | None, value: float) -> Tensor:
        tf = self.tf
        scope = tf.get_variable_scope().name
        full_name = f"{scope}/{name}" if scope else name
        return tf.get_variable(
            name, shape=shape, dtype=tf.float32,
            initializer=SliceOfFull(tf, self.seed, full_name, stddev, value),
            partitioner=self.partitioner)


def dense(vm: VariableMaker, x: Tensor, scope: str, units: int, stddev: float | None = None,
          bias: float = 0.0) -> Tensor:
    tf = vm.tf
    with tf.variable_scope(scope):
        w = vm.weights([int(x.shape[-1]), units], stddev)
        b = vm.bias([units], bias)
        return tf.matmul(x, w) + b


def conv(vm: VariableMaker, x: Tensor, scope: str, size: int, filters: int,
         stddev: float | None = None, bias: float = 0.0) -> Tensor:
    tf = vm.tf
    with tf.variable_scope(scope):
        k = vm.weights([size, size, int(x.shape[-1]), filters], stddev)
        b = vm.bias([filters], bias)
        return tf.nn.relu(tf.nn.conv2d(x, k, strides=[1, 1, 1, 1], padding="SAME") + b)


def _flatten(tf: Any, x: Tensor) -> Tensor:
    return tf.reshape(x, [-1, math.prod(int(d) for d in x.shape[1:])])


def _pool(tf: Any, x: Tensor, size: int = 2) -> Tensor:
    return tf.nn.max_pool2d(x, ksize=size, strides=2, padding="SAME")


def _dropout(tf: Any, x: Tensor, training: bool, rate: float) -> Tensor:
    return tf.nn.dropout(x, rate=rate) if training else x


def softmax(vm: VariableMaker, x: Tensor, training: bool, hidden: int) -> Tensor:
    """Seed 001's mnist_softmax: one linear layer."""
    return dense(vm, _flatten(vm.tf, x), "softmax", 10, stddev=0.01)


def mlp(vm: VariableMaker, x: Tensor, training: bool, hidden: int) -> Tensor:
    """Seed 003's two-layer network (ReLU instead of its sigmoid, which barely learns)."""
    h = vm.tf.nn.relu(dense(vm, _flatten(vm.tf, x), "hidden", hidden))
    return dense(vm, h, "logits", 10)


def cnn(vm: VariableMaker, x: Tensor, training: bool, hidden: int) -> Tensor:
    """Seed 000's deepnn: two 5x5 conv+pool layers, a 1024-unit layer, dropout."""
    tf = vm.tf
    h = _pool(tf, conv(vm, x, "conv1", 5, 32, stddev=0.1, bias=0.1))
    h = _pool(tf, conv(vm, h, "conv2", 5, 64, stddev=0.1, bias=0.1))
    h = tf.nn.relu(dense(vm, _flatten(tf, h), "fc1", 1024, stddev=0.1, bias=0.1))
    h = _dropout(tf, h, training, 0.5)
    return dense(vm, h, "fc2", 10, stddev=0.1, bias=0.1)


def cifar_cnn(vm: VariableMaker, x: Tensor, training: bool, hidden: int) -> Tensor:
    """Seed 004's CIFAR-10 tutorial model: conv-pool-norm, conv-norm-pool, 384, 192, 10."""
    tf = vm.tf

    def lrn(h: Tensor) -> Tensor:
        return tf.nn.lrn(h, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)

    h = lrn(_pool(tf, conv(vm, x, "conv1", 5, 64, stddev=5e-2), 3))
    h = _pool(tf, lrn(conv(vm, h, "conv2", 5, 64, stddev=5e-2, bias=0.1)), 3)
    h = tf.nn.relu(dense(vm, _flatten(tf, h), "local3", 384, stddev=0.04, bias=0.1))
    h = tf.nn.relu(dense(vm, h, "local4", 192, stddev=0.04, bias=0.1))
    return dense(vm, h, "softmax_linear", 10, stddev=1 / 192.0)


_VGG19_BLOCKS = ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4))


def vgg19(vm: VariableMaker, x: Tensor, training: bool, hidden: int) -> Tensor:
    """VGG-19 (configuration E) with a 10-way classifier; the input size is free."""
    tf = vm.tf
    h = x
    for block, (filters, layers) in enumerate(_VGG19_BLOCKS, start=1):
        for layer in range(1, layers + 1):
            h = conv(vm, h, f"conv{block}_{layer}", 3, filters)
        h = _pool(tf, h)
    h = _flatten(tf, h)
    h = _dropout(tf, tf.nn.relu(dense(vm, h, "fc6", 4096)), training, 0.5)
    h = _dropout(tf, tf.nn.relu(dense(vm, h, "fc7", 4096)), training, 0.5)
    return dense(vm, h, "fc8", 10)


MODELS: dict[Model, ModelFn] = {
    Model.SOFTMAX: softmax,
    Model.MLP: mlp,
    Model.CNN: cnn,
    Model.CIFAR_CNN: cifar_cnn,
    Model.VGG19: vgg19,
}
