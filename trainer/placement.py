"""Where variables go: the partitioner, the ps strategies, and the placement report.

TensorFlow's default strategy is round-robin over variables, whatever their size: seed 000's
CNN at 2 ps puts every byte of its big layers on one ps. ``greedy`` puts each variable or
shard on the ps holding the fewest bytes so far.

Partitioning splits a variable with ``fixed_size_partitioner`` along axis 0 when its first
dimension is >= N, as the seeds do. Unlike the seeds, a variable whose first dimension is
too small (a conv kernel [5, 5, in, out]) is split along its largest dimension instead when
that one is >= N: left whole, those kernels alone keep an 8-ps CNN at max/mean 1.11."""

from __future__ import annotations

import re
from typing import Any

from trainer import protocol

_PS_TASK = re.compile(r"/job:ps/(?:replica:\d+/)?task:(\d+)")
_VARIABLE_OPS = frozenset({"Variable", "VariableV2", "VarHandleOp", "AutoReloadVariable"})


def split_axis(shape: list[int], partitions: int) -> int | None:
    """The axis a variable of this shape is split along, or None to keep it whole."""
    if partitions <= 1 or not shape:
        return None
    if shape[0] >= partitions:
        return 0
    largest = max(range(len(shape)), key=lambda axis: shape[axis])
    return largest if shape[largest] >= partitions else None


def make_partitioner(tf: Any, partitions: int) -> Any:
    """A TF1 partitioner applying :func:`split_axis`, or None when nothing is split."""
    if partitions <= 1:
        return None

    def partitioner(shape: Any, dtype: Any) -> list[int]:
        dims = [int(d) for d in shape.as_list()]
        axis = split_axis(dims, partitions)
        if axis is None:
            return [1] * len(dims)
        return list(tf.fixed_size_partitioner(partitions, axis=axis)(shape=shape, dtype=dtype))

    return partitioner


def op_bytes(tf: Any, op: Any) -> int:
    """Bytes of the variable an op creates (0 for other ops)."""
    node = op.node_def
    if node.op not in _VARIABLE_OPS:
        return 0
    shape = tf.TensorShape(node.attr["shape"].shape)
    dtype = tf.as_dtype(node.attr["dtype"].type)
    if not shape.is_fully_defined():
        return 0
    return int(shape.num_elements()) * dtype.size


class GreedyStrategy:
    """``ps_strategy`` for ``replica_device_setter``: each variable (shard) goes to the ps
    with the fewest bytes so far; ties go to the lowest index."""

    def __init__(self, tf: Any, num_ps: int):
        self._tf = tf
        self.loads = [0] * num_ps

    def __call__(self, op: Any) -> int:
        # Non-variable ps ops (queues, accumulators) carry no model bytes; they are placed
        # on the least-loaded ps too but do not change the loads.
        target = min(range(len(self.loads)), key=lambda i: (self.loads[i], i))
        self.loads[target] += op_bytes(self._tf, op)
        return target


def ps_index(device: str) -> int | None:
    match = _PS_TASK.search(device or "")
    return int(match.group(1)) if match else None


def report(tf: Any, *, model: str, strategy: str, partitions: int, num_ps: int,
           role: str = "worker", index: int = 0) -> protocol.Placement:
    """Describe every global variable (or shard) of the default graph and its ps."""
    trainable = {v.name for v in tf.trainable_variables()}
    shards: list[tuple[str, str, int, Any]] = []
    counts: dict[str, int] = {}
    for var in tf.global_variables():
        name = var.op.name
        info = getattr(var, "_save_slice_info", None)
        full = info.full_name if info is not None else name
        counts[full] = counts.get(full, 0) + 1
        shards.append((name, full, counts[full] - 1, var))
    totals = [0] * num_ps
    entries = []
    for name, full, shard, var in shards:
        shape = tuple(int(d) for d in var.shape.as_list())
        dtype = var.dtype.base_dtype
        nbytes = int(var.shape.num_elements() or 0) * dtype.size
        ps = ps_index(var.device)
        if ps is None:
            continue
        totals[ps] += nbytes
        entries.append(protocol.VariableShard(
            name=name, variable=full, shard=shard, num_shards=counts[full], shape=shape,
            dtype=dtype.name, bytes=nbytes, ps=ps, trainable=var.name in trainable))
    return protocol.Placement(role=role, index=index, model=model, strategy=strategy,
                              partitions=partitions, num_ps=num_ps, variables=tuple(entries),
                              ps_bytes=tuple(totals))


def table(placement: protocol.Placement) -> str:
    """A human-readable placement table with per-ps totals and the max/mean ratio."""
    lines = [f"{'variable':<40} {'shard':>7} {'shape':<20} {'dtype':<8} {'bytes':>12} {'ps':>3}"]
    for v in placement.variables:
        shard = f"{v.shard + 1}/{v.num_shards}"
        shape = "x".join(str(d) for d in v.shape) or "scalar"
        lines.append(f"{v.variable:<40} {shard:>7} {shape:<20} {v.dtype:<8} {v.bytes:>12,} {v.ps:>3}")
    lines.append("")
    peak = max(placement.ps_bytes, default=0) or 1
    for i, total in enumerate(placement.ps_bytes):
        bar = "#" * round(30 * total / peak)
        lines.append(f"ps{i:<3} {total:>14,} bytes  {bar}")
    lines.append(f"max/mean {placement.max_mean_ratio:.2f}  ({placement.strategy}, "
                 f"partitions {placement.partitions}, {placement.num_ps} ps)")
    return "\n".join(lines)
