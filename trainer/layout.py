"""The placement the built-in trainer's graph gets, computed without TensorFlow.

Everything that decides it is known before any graph exists: the variables each model
creates (their shapes follow from the input shape, see :mod:`trainer.models`), the
partitioner's rule (:func:`trainer.placement.split_axis`, then ``fixed_size_partitioner``'s
even split), the ps strategy (:class:`trainer.placement.GreedyStrategy` or
``RoundRobinStrategy``, called once per variable shard in creation order), and the
optimizer's slots, which TensorFlow colocates with their variable. So the app previews a
placement in microseconds instead of a cold TensorFlow import (5-50 s).

tests/trainer/test_layout.py builds TensorFlow's own graph (:func:`trainer.graph.build`)
for every model, partition count, strategy and optimizer and checks that this module gives
the same placement, shard by shard."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from trainer import protocol
from trainer.data import input_shape
from trainer.placement import split_axis
from trainer.settings import Model, Optimizer, PlacementStrategy, TrainingSettings

FLOAT32_BYTES = 4
INT64_BYTES = 8
CLASSES = 10

#: Slot variables per optimizer, named as TensorFlow names them (the optimizer's name,
#: then ``_1`` for the second), in the order it creates them for each variable.
SLOTS: dict[Optimizer, tuple[str, ...]] = {
    Optimizer.SGD: (),
    Optimizer.ADAGRAD: ("Adagrad",),
    Optimizer.RMSPROP: ("RMSProp", "RMSProp_1"),
    Optimizer.ADAM: ("Adam", "Adam_1"),
}
#: Variables an optimizer keeps once (not per variable), colocated by TensorFlow with the
#: variable whose name sorts first.
NON_SLOTS: dict[Optimizer, tuple[str, ...]] = {Optimizer.ADAM: ("beta1_power", "beta2_power")}


@dataclass(frozen=True)
class Weight:
    """One model variable before partitioning: ``scope/weights`` or ``scope/biases``."""

    name: str
    shape: tuple[int, ...]


class _Shapes:
    """Walks a model as :mod:`trainer.models` builds it, keeping the activation's shape
    (height, width, channels, or features once flattened) and collecting the weights."""

    def __init__(self, shape: tuple[int, int, int]):
        self.height, self.width, self.channels = shape
        self.features = 0
        self.weights: list[Weight] = []

    def _layer(self, scope: str, kernel: tuple[int, ...], units: int) -> None:
        self.weights += [Weight(f"{scope}/weights", kernel), Weight(f"{scope}/biases", (units,))]

    def conv(self, scope: str, size: int, filters: int) -> None:
        self._layer(scope, (size, size, self.channels, filters), filters)
        self.channels = filters  # padding SAME, stride 1: height and width stay

    def pool(self) -> None:
        # max_pool2d, stride 2, padding SAME (any window): ceil(n / 2).
        self.height, self.width = -(-self.height // 2), -(-self.width // 2)

    def flatten(self) -> None:
        self.features = self.height * self.width * self.channels

    def dense(self, scope: str, units: int) -> None:
        self._layer(scope, (self.features, units), units)
        self.features = units


def _softmax(s: _Shapes, hidden: int) -> None:
    s.flatten()
    s.dense("softmax", CLASSES)


def _mlp(s: _Shapes, hidden: int) -> None:
    s.flatten()
    s.dense("hidden", hidden)
    s.dense("logits", CLASSES)


def _cnn(s: _Shapes, hidden: int) -> None:
    s.conv("conv1", 5, 32)
    s.pool()
    s.conv("conv2", 5, 64)
    s.pool()
    s.flatten()
    s.dense("fc1", 1024)
    s.dense("fc2", CLASSES)


def _cifar_cnn(s: _Shapes, hidden: int) -> None:
    s.conv("conv1", 5, 64)
    s.pool()
    s.conv("conv2", 5, 64)
    s.pool()
    s.flatten()
    s.dense("local3", 384)
    s.dense("local4", 192)
    s.dense("softmax_linear", CLASSES)


def _vgg19(s: _Shapes, hidden: int) -> None:
    for block, (filters, layers) in enumerate(((64, 2), (128, 2), (256, 4), (512, 4), (512, 4)), 1):
        for layer in range(1, layers + 1):
            s.conv(f"conv{block}_{layer}", 3, filters)
        s.pool()
    s.flatten()
    s.dense("fc6", 4096)
    s.dense("fc7", 4096)
    s.dense("fc8", CLASSES)


_MODELS: dict[Model, Callable[[_Shapes, int], None]] = {
    Model.SOFTMAX: _softmax, Model.MLP: _mlp, Model.CNN: _cnn, Model.CIFAR_CNN: _cifar_cnn,
    Model.VGG19: _vgg19,
}


def model_weights(settings: TrainingSettings) -> list[Weight]:
    """The model's variables in the order the graph creates them."""
    shapes = _Shapes(input_shape(settings))
    _MODELS[settings.model](shapes, settings.hidden_units)
    return shapes.weights


def shard_shapes(shape: tuple[int, ...], partitions: int) -> list[tuple[int, ...]] | None:
    """The shapes of a variable's shards, or None when it is not partitioned at all
    (``partitions`` 1: no partitioner, so no ``part_0`` either). ``fixed_size_partitioner``
    splits evenly, the first ``size % n`` shards one row longer."""
    if partitions <= 1:
        return None
    axis = split_axis(list(shape), partitions)
    if axis is None:
        return [shape]  # the partitioner said [1, 1, ...]: one shard, still named part_0
    size, extra = divmod(shape[axis], partitions)
    return [(*shape[:axis], size + (1 if k < extra else 0), *shape[axis + 1:])
            for k in range(partitions)]


class _Chooser:
    """The ps strategy of :func:`trainer.graph.build`, asked once per variable shard."""

    def __init__(self, strategy: PlacementStrategy, num_ps: int):
        self.greedy = strategy is PlacementStrategy.GREEDY
        self.loads = [0] * num_ps
        self._next = 0

    def __call__(self, nbytes: int) -> int:
        if self.greedy:
            target = min(range(len(self.loads)), key=lambda i: (self.loads[i], i))
            self.loads[target] += nbytes
            return target
        target, self._next = self._next, (self._next + 1) % len(self.loads)
        return target


def plan(settings: TrainingSettings, num_ps: int) -> protocol.Placement:
    """The placement ``python -m trainer plan`` reports for ``settings`` on ``num_ps`` ps
    tasks (worker 0's graph; every worker builds the same one)."""
    choose = _Chooser(settings.placement, num_ps)
    entries = [protocol.VariableShard(name="global_step", variable="global_step", shard=0,
                                      num_shards=1, shape=(), dtype="int64", bytes=INT64_BYTES,
                                      ps=choose(INT64_BYTES), trainable=False)]
    # Model variables: each shard placed by the strategy, in creation order.
    model: list[protocol.VariableShard] = []
    for weight in model_weights(settings):
        shards = shard_shapes(weight.shape, settings.partitions)
        for k, shape in enumerate(shards or [weight.shape]):
            nbytes = math.prod(shape) * FLOAT32_BYTES
            model.append(protocol.VariableShard(
                name=f"{weight.name}/part_{k}" if shards else weight.name, variable=weight.name,
                shard=k, num_shards=len(shards or [weight.shape]), shape=shape, dtype="float32",
                bytes=nbytes, ps=choose(nbytes), trainable=True))
    entries += model
    # The optimizer's variables: colocated with a model variable, never asked of the strategy.
    first = min(model, key=lambda v: f"{v.name}:0")  # as TensorFlow compares them
    entries += [protocol.VariableShard(name=name, variable=name, shard=0, num_shards=1, shape=(),
                                       dtype="float32", bytes=FLOAT32_BYTES, ps=first.ps,
                                       trainable=False)
                for name in NON_SLOTS.get(settings.optimizer, ())]
    for var in model:
        for slot in SLOTS[settings.optimizer]:
            entries.append(protocol.VariableShard(
                name=f"{var.name}/{slot}", variable=f"{var.variable}/{slot}", shard=var.shard,
                num_shards=var.num_shards, shape=var.shape, dtype="float32", bytes=var.bytes,
                ps=var.ps, trainable=False))
    totals = [0] * num_ps
    for entry in entries:
        totals[entry.ps] += entry.bytes
    return protocol.Placement(role="worker", index=0, model=settings.model.value,
                              strategy=settings.placement.value, partitions=settings.partitions,
                              num_ps=num_ps, variables=tuple(entries), ps_bytes=tuple(totals))
