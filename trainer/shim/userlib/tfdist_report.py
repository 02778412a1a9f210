"""Report exact training figures to tfdist-tui from your own program (optional).

    from tfdist_report import step, eval

    for batch in data:
        _, loss_value, global_step = sess.run([train_op, loss, global_step_tensor])
        step(global_step, loss=loss_value, examples=len(batch))
    eval(global_step, accuracy=0.97, loss=0.1, examples=len(test_set))
    placement(model.variables)   # TF2: where the strategy put them (the shim sees TF1 graphs)

Under the controller (``TFDIST_RUN_ID`` or ``TFDIST_SHIM`` in the environment) each call
prints one event line of the controller's protocol (version 1) on stdout, which fills the
loss, accuracy and throughput panes. ``step`` may be called every step: it prints at most
about twice a second and counts the examples in between. Run by hand, both functions do
nothing, so the program's output is unchanged. Standard library only: this file is shipped to
every host with the shim, and its folder is on ``PYTHONPATH`` of every task.

The task's role and index come from the shim (it learns them from the program's
``tf.train.Server``), else from ``TF_CONFIG``.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["eval", "placement", "step"]

#: Seconds between two printed ``step`` events.
MIN_INTERVAL = 0.5
#: When this process last printed a ``step`` (``time.monotonic()``); the shim reads it so that
#: it does not report the same steps again.
last_step_report = 0.0
#: Whether this process reported a placement; the shim then leaves the program's own standing.
placement_reported = False

_lock = threading.Lock()
_pending: dict[str, object] = {}
_since: dict[str, float] = {"time": 0.0, "examples": 0.0, "steps": 0.0, "local": 0.0}


def active() -> bool:
    """Whether the controller runs this program (otherwise every call does nothing)."""
    return bool(os.environ.get("TFDIST_RUN_ID") or os.environ.get("TFDIST_SHIM"))


def _task() -> tuple[str, int]:
    task = os.environ.get("TFDIST_TASK", "")
    if ":" in task:
        role, _, index = task.partition(":")
        if index.isdigit():
            return role, int(index)
    try:
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        return str(config["task"]["type"]), int(config["task"].get("index", 0))
    except (ValueError, KeyError, TypeError, AttributeError):
        return "worker", 0


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _emit(kind: str, fields: dict[str, object]) -> None:
    role, index = _task()
    body = {"event": kind, "v": 1, "role": role, "index": index, "t": time.time(), **fields}
    sys.stdout.write(json.dumps(body, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def step(global_step: int, loss: float | None = None, accuracy: float | None = None,
         examples: int | None = None) -> None:
    """This task finished a training step. ``global_step``: the cluster's step after it;
    ``examples``: examples this task processed since its previous call (its batch size)."""
    global last_step_report
    if not active():
        return
    now = time.monotonic()
    with _lock:
        if not _since["time"]:
            _since["time"] = now
        _since["examples"] += float(examples or 0)
        _since["steps"] += 1
        _since["local"] += 1
        _pending.update(global_step=int(global_step), loss=_number(loss),
                        accuracy=_number(accuracy))
        if last_step_report and now - last_step_report < MIN_INTERVAL:
            return
        _flush(now)


def _flush(now: float) -> None:
    global last_step_report
    if not _pending:
        return
    elapsed = now - _since["time"]
    # The very first call has no interval behind it: no rate yet.
    rate = _since["examples"] / elapsed if elapsed > 1e-3 else 0.0
    _emit("step", {**_pending, "local_step": int(_since["local"]),
                   "examples_per_sec": round(rate, 3),
                   "step_time": round(elapsed / max(_since["steps"], 1.0), 6)})
    _pending.clear()
    _since.update(time=now, examples=0.0, steps=0.0)
    last_step_report = now


def eval(global_step: int, accuracy: float, loss: float | None = None,
         examples: int = 0) -> None:
    """Held-out accuracy (and loss) measured at ``global_step`` over ``examples`` examples."""
    if not active():
        return
    with _lock:
        _flush(time.monotonic())
    _emit("eval", {"global_step": int(global_step), "accuracy": _number(accuracy) or 0.0,
                   "loss": _number(loss), "examples": int(examples)})


@atexit.register
def _last() -> None:
    """The last steps, held back by the rate limit, are printed at exit."""
    if active():
        with _lock:
            _flush(time.monotonic())


_PS_TASK = re.compile(r"/job:ps/(?:replica:\d+/)?task:(\d+)")
_PART = re.compile(r"(.+)/part_(\d+)")


def placement(variables: Iterable[Any], model: str = "", strategy: str = "program") -> None:
    """Where ``variables`` live, for the Placement pane: TF2 variables (``tf.Variable``, or a
    ``ShardedVariable`` whose ``variables`` are its shards), e.g. a model's ``variables``
    under ``ParameterServerStrategy``. A variable on no ps is named in ``unattributed``."""
    global placement_reported
    if not active():
        return
    placement_reported = True
    try:
        num_ps = len(json.loads(os.environ.get("TF_CONFIG") or "{}")["cluster"].get("ps", []))
    except (ValueError, KeyError, TypeError, AttributeError):
        num_ps = 0
    # A ShardedVariable's pieces are its ``variables``; tf.Module lists them itself, named
    # ``<variable>/part_<i>``, which is how they are told apart again here.
    pieces = []
    for shard in (piece for v in variables for piece in (getattr(v, "variables", None) or [v])):
        name = str(shard.name).split(":")[0]
        part = _PART.fullmatch(name)
        pieces.append((shard, name, part, part.group(1) if part else name))
    counts: dict[str, int] = {}
    for *_, base in pieces:
        counts[base] = counts.get(base, 0) + 1
    entries: list[dict[str, Any]] = []
    unattributed: list[str] = []
    for shard, name, part, base in pieces:
        device = str(getattr(shard, "device", "") or "")
        match = _PS_TASK.search(device)
        if match is None:
            unattributed.append(f"{name}: on {device or 'no device'}, not on a ps")
            continue
        shape = [int(d) for d in shard.shape]
        dtype = getattr(shard.dtype, "base_dtype", shard.dtype)
        entries.append({"name": name, "variable": base, "shard": int(part.group(2)) if part else 0,
                        "num_shards": counts[base], "shape": shape, "dtype": str(dtype.name),
                        "ps": int(match.group(1)), "bytes": math.prod(shape) * int(dtype.size),
                        "trainable": bool(getattr(shard, "trainable", True))})
    ps_bytes = [0] * max([num_ps, *(e["ps"] + 1 for e in entries)])
    for entry in entries:
        ps_bytes[entry["ps"]] += entry["bytes"]
    _emit("placement", {"model": model or os.path.basename(sys.argv[0] or "program"),
                        "strategy": strategy, "num_ps": len(ps_bytes), "variables": entries,
                        "partitions": max((e["num_shards"] for e in entries), default=1),
                        "ps_bytes": ps_bytes, "unattributed": unattributed})
