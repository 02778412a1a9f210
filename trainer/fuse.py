"""Fused transfers: the trainable variables (and shards) a ps holds move to a worker as one
tensor a step, and their gradients back as one.

Unfused, a step moves every variable from its ps and every gradient back as a tensor of its
own: one gRPC RecvTensor each way per variable, which on loopback costs far more than a
small model's compute (the mlp on 2 cores: 5.4 ms a step, 0.8 ms alone). Fused, each ps
concatenates its variables' values into one flat tensor (on the ps), the worker receives it
once and splits it into views shaped like the variables, which the model reads through a
custom getter; the gradient with respect to that one received tensor is one flat tensor,
sent once, split on the ps and applied there to each variable. The variables themselves, and
so the placement and the bytes on each ps, are exactly those of the unfused graph."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Tensor = Any
#: Variables (shards) larger than this move alone, fused or not: a transfer's fixed cost is
#: nothing beside their bytes, and packing them would only copy them twice more a step
#: (seed 000's CNN's 12.8 MB fc1 on each side).
ALONE_BYTES = 1 << 20
#: float32 words that carry the int64 global step in a packed read.
STEP_WORDS = 2


@dataclass
class PsGroup:
    """The trainable variables (shards) on one ps, in creation order, and the worker's copy
    of their packed values."""

    device: str
    variables: list[Any]
    sizes: list[int]
    carries_step: bool = False  # the global step's words follow the variables
    received: Tensor = None  # the packed values on the worker: the one tensor read a step
    views: dict[str, Tensor] = field(default_factory=dict)  # variable op name -> its view


class FusedReads:
    """One packed read per ps, built once per worker graph; :meth:`getter` hands the model
    views of it instead of the variables."""

    def __init__(self, tf: Any, variables: list[Any], worker_device: str, global_step: Any):
        self.tf = tf
        self._order = {var.op.name: k for k, var in enumerate(variables)}
        #: Variables read and pushed alone (over :data:`ALONE_BYTES`), as unfused.
        self.alone = [v for v in variables if _bytes(v) > ALONE_BYTES]
        by_device: dict[str, PsGroup] = {}
        for var in variables:
            if _bytes(var) > ALONE_BYTES:
                continue
            group = by_device.setdefault(var.device, PsGroup(var.device, [], []))
            group.variables.append(var)
            group.sizes.append(int(var.shape.num_elements()))
        # The global step rides in its ps's packed read, its 8 bytes as two float32 words
        # (bit for bit), so that a worker learns the step without a transfer of its own.
        by_device.setdefault(global_step.device, PsGroup(global_step.device, [], []))
        self.groups = list(by_device.values())
        self.step_read: Tensor = None  # the global step as this step read it (on the worker)
        for k, group in enumerate(self.groups):
            group.carries_step = carries_step = group.device == global_step.device
            with tf.device(group.device):
                flat = [tf.reshape(v, [-1]) for v in group.variables]
                if carries_step:
                    flat.append(tf.bitcast(global_step.read_value(), tf.float32))
                packed = tf.concat(flat, 0, name=f"fused_read_{k}")
            with tf.device(worker_device):
                group.received = tf.identity(packed, name=f"fused_received_{k}")
                pieces = tf.split(group.received, self._split_sizes(group))
                for var, piece in zip(group.variables, pieces[:len(group.variables)], strict=True):
                    group.views[var.op.name] = tf.reshape(piece, var.shape)
                if carries_step:
                    self.step_read = tf.bitcast(pieces[-1], global_step.dtype.base_dtype)

    @staticmethod
    def _split_sizes(group: PsGroup) -> list[int]:
        return group.sizes + ([STEP_WORDS] if group.carries_step else [])

    def _view(self, var: Any) -> Tensor:
        for group in self.groups:
            if var.op.name in group.views:
                return group.views[var.op.name]
        return var  # not trainable (never asked for by the models): read as it is

    def getter(self, getter: Callable[..., Any], name: str, *args: Any, **kwargs: Any) -> Tensor:
        """A ``custom_getter``: the variable's view (a partitioned one's shards' views put
        together along the axis it was split on)."""
        var = getter(name, *args, **kwargs)
        if hasattr(var, "_get_partitions"):  # a PartitionedVariable
            shards = list(var)
            counts = var._get_partitions()
            axis = max(range(len(counts)), key=lambda a: counts[a])
            views = [self._view(s) for s in shards]
            return views[0] if len(views) == 1 else self.tf.concat(views, axis)
        return self._view(var)

    def gradients(self, loss: Tensor) -> list[Tensor | None]:
        """The gradient of ``loss`` with respect to each ps's packed values (on the worker),
        then to each variable read alone."""
        return list(self.tf.gradients(loss, [g.received for g in self.groups] + self.alone))

    def grads_and_vars(self, flat: list[Tensor | None]) -> list[tuple[Tensor, Any]]:
        """Each packed gradient split on its ps into the variables' gradients (and those of
        the variables read alone, as they are)."""
        tf = self.tf
        packed, alone = flat[:len(self.groups)], flat[len(self.groups):]
        pairs: list[tuple[Tensor, Any]] = [(g, v) for g, v in zip(alone, self.alone, strict=True)
                                           if g is not None]
        for group, grad in zip(self.groups, packed, strict=True):
            if grad is None or not group.variables:
                continue
            with tf.device(group.device):
                # (The step's words, last, get a zero gradient; they are split off unused.)
                pieces = tf.split(grad, self._split_sizes(group))[:len(group.variables)]
                pairs += [(tf.reshape(piece, var.shape), var)
                          for piece, var in zip(pieces, group.variables, strict=True)]
        # In the variables' order, as unfused: the optimizer creates its slots in this order,
        # which the placement report lists (and trainer.layout predicts).
        return sorted(pairs, key=lambda pair: self._order[pair[1].op.name])


def _bytes(var: Any) -> int:
    return int(var.shape.num_elements()) * var.dtype.base_dtype.size
