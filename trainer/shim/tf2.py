"""The shim's hooks on TF2's ``ParameterServerStrategy`` and ``ClusterCoordinator``, so a
TF2 program is seen with no change, as a TF1 one is:

- every variable the strategy creates (under its ``scope()``, optimizer slots included) is
  recorded; once the program schedules its first function (traced by then, so the slots
  exist) the chief emits ``placement`` (a ``ShardedVariable``'s parts as shards), again if
  later schedules created more variables;
- the step counts batches, the optimizer's iterations: the value of the program's step
  variable (Keras' optimizer ``iter``/``iteration``, else a ``global_step``) when it has one,
  so that a function running ``steps_per_execution`` batches counts as that many; else
  each function a worker finished counts as one. ``initialized`` (as the coordinator) at
  the first schedule, then ``step`` about once a second while the count moves, and the final
  count in ``done`` when the chief returns;
- each ``step`` is the whole cluster's (``coordinator``), with the functions each worker
  finished so far (``by_worker``: the coordinator knows which worker ran each one);
- every :data:`trainer.shim.functions.INTERVAL` seconds (and at the end) a ``step_anatomy``
  of the functions finished since the last, as the coordinator sees them: queued, on a
  worker, each worker's mean, the retried.

``tfdist_report.step`` stays the way to report the program's own step, loss and accuracy,
and while it does the shim's ``step`` events stay quiet."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
import threading
import time
from typing import Any

from trainer import lifecycle, protocol
from trainer import placement as placement_mod
from trainer.shim import functions
from trainer.shim.state import STATE, seconds_since_start, soft

#: Seconds between two ``step`` events while the count moves.
STEP_INTERVAL = 1.0
#: The shim's name for the strategy in ``placement``.
STRATEGY = "ParameterServerStrategy"
#: Names (the last part) of a variable that counts batches, most telling first: Keras'
#: optimizers (``iter`` in Keras 2's, ``iteration`` in the newer ones), then a global step.
STEP_VARIABLES = ("iter", "iteration", "iterations", "global_step")
#: How a partitioner names the parts of a variable: ``user_emb/part_0``.
_PART = re.compile(r"/part_(\d+)$")


class _Tracker:
    """Variables the strategy created and the functions the workers finished."""

    lock = threading.Lock()
    variables: list[Any] = []
    placed = 0           # how many variables the last placement described
    scheduled = 0
    finished = 0
    by_worker: dict[int, int] = {}  # functions finished, by worker index
    finished_at = 0.0    # monotonic time the last function finished
    thread: threading.Thread | None = None
    emit_lock = threading.Lock()
    mark = (0, 0.0)      # (step, monotonic time) of the last step event
    step_variable: Any = None
    #: The worker whose thread runs the closure (each worker has its own thread).
    current = threading.local()


def install() -> None:
    """Patch the strategy's variable creation and the coordinator (TF2 only; a TensorFlow
    without them leaves the TF1 hooks alone)."""
    from tensorflow.python.distribute import parameter_server_strategy_v2 as strategy_v2
    from tensorflow.python.distribute.coordinator import cluster_coordinator

    soft("the TF2 variable hook",
         lambda: _patch_create(strategy_v2.ParameterServerStrategyV2Extended))
    soft("the TF2 schedule hook", lambda: _patch_schedule(cluster_coordinator.ClusterCoordinator))
    soft("the TF2 step hook",
         lambda: _patch_finished(cluster_coordinator._CoordinatedClosureQueue))
    soft("the TF2 queue hook", lambda: _patch_queue(cluster_coordinator._CoordinatedClosureQueue))
    soft("the TF2 worker hook", lambda: _patch_worker(cluster_coordinator.Worker))


def _patch_create(extended: Any) -> None:
    original = extended._create_variable

    @functools.wraps(original)
    def create_variable(self: Any, next_creator: Any, **kwargs: Any) -> Any:
        per_worker = bool(kwargs.get("per_worker_variable", False))
        variable = original(self, next_creator, **kwargs)
        if not per_worker:  # a per-worker variable lives on the workers, not on a ps
            with _Tracker.lock:
                _Tracker.variables.append(variable)
        return variable

    extended._create_variable = create_variable


def _patch_schedule(coordinator: Any) -> None:
    original = coordinator.schedule

    @functools.wraps(original)
    def schedule(self: Any, fn: Any, args: Any = None, kwargs: Any = None) -> Any:
        value = original(self, fn, args=args, kwargs=kwargs)
        soft("the TF2 schedule hook", _on_scheduled)
        return value

    coordinator.schedule = schedule


def _patch_finished(queue: Any) -> None:
    original = queue.mark_finished

    @functools.wraps(original)
    def mark_finished(self: Any) -> None:
        original(self)
        worker = getattr(_Tracker.current, "index", None)
        soft("the TF2 function timing", lambda: functions.finished(worker))
        with _Tracker.lock:  # only functions: the datasets' resource closures never get here
            _Tracker.finished += 1
            _Tracker.finished_at = time.monotonic()
            if worker is not None:
                _Tracker.by_worker[worker] = _Tracker.by_worker.get(worker, 0) + 1

    queue.mark_finished = mark_finished


def _patch_worker(worker_class: Any) -> None:
    """Note which worker runs a function: each worker processes its functions in a thread of
    its own, and marks them finished in it."""
    original = worker_class._process_closure

    @functools.wraps(original)
    def process_closure(self: Any, closure: Any) -> Any:
        _Tracker.current.index = getattr(self, "worker_index", None)
        soft("the TF2 function timing", lambda: functions.started(closure))
        return original(self, closure)

    worker_class._process_closure = process_closure


def _patch_queue(queue: Any) -> None:
    """The time each function is scheduled (put in the closure queue), and those put back
    to run again, for the coordinator's anatomy (:mod:`trainer.shim.functions`)."""
    original_put, original_put_back = queue.put, queue.put_back

    @functools.wraps(original_put)
    def put(self: Any, closure: Any, *args: Any, **kwargs: Any) -> Any:
        soft("the TF2 function timing", lambda: functions.queued(closure))
        return original_put(self, closure, *args, **kwargs)

    @functools.wraps(original_put_back)
    def put_back(self: Any, closure: Any) -> Any:
        soft("the TF2 function timing", functions.put_back)
        return original_put_back(self, closure)

    queue.put, queue.put_back = put, put_back


def _on_scheduled() -> None:
    with _Tracker.lock:
        _Tracker.scheduled += 1
        first = _Tracker.scheduled == 1
        more = len(_Tracker.variables) != _Tracker.placed
        variables = list(_Tracker.variables)
        _Tracker.placed = len(variables)
    if more and variables and not _placement_reported():
        soft("the TF2 placement hook", lambda: lifecycle.emit(placement(variables)))
        STATE.placement_sent = True
    if first:
        lifecycle.emit(protocol.Initialized(role=STATE.role, index=STATE.index, global_step=0,
                                            seconds=seconds_since_start(), is_chief=True,
                                            coordinator=True))
        _Tracker.mark = (0, time.monotonic())
        _Tracker.thread = threading.Thread(target=_report_steps, name="tfdist-shim-tf2-steps",
                                           daemon=True)
        _Tracker.thread.start()


def placement(variables: list[Any]) -> protocol.Placement:
    """Where the strategy put ``variables`` (a ``ShardedVariable``'s parts as its shards)."""
    shards: list[protocol.VariableShard] = []
    unattributed: list[str] = []
    num_ps = STATE.num_ps
    for variable in variables:
        parts = list(getattr(variable, "variables", None) or [variable])
        full = _name(variable)
        for i, part in enumerate(parts):
            name = _name(part)
            device = str(getattr(part, "device", "") or "")
            ps = placement_mod.ps_index(device)
            if ps is None:
                unattributed.append(f"{name}: on {device or 'no device'}, not on a ps")
                continue
            shape = tuple(int(d) for d in part.shape)
            dtype = getattr(part.dtype, "base_dtype", part.dtype)
            shards.append(protocol.VariableShard(
                name=name, variable=full, shard=i, num_shards=len(parts), shape=shape,
                dtype=str(dtype.name), bytes=math.prod(shape) * int(dtype.size), ps=ps,
                trainable=bool(getattr(variable, "trainable", True))))
            num_ps = max(num_ps, ps + 1)
    shards = _by_partition(shards)
    ps_bytes = [0] * num_ps
    for shard in shards:
        ps_bytes[shard.ps] += shard.bytes
    return protocol.Placement(role=STATE.role, index=STATE.index, model=STATE.program, strategy=STRATEGY,
                              partitions=max((s.num_shards for s in shards), default=1),
                              num_ps=num_ps, variables=tuple(shards), ps_bytes=tuple(ps_bytes),
                              unattributed=tuple(unattributed))


def _by_partition(shards: list[protocol.VariableShard]) -> list[protocol.VariableShard]:
    """Shards named as a partitioner names them (``user_emb/part_0``) grouped under their
    variable (``user_emb``): TensorFlow's ``ShardedVariable`` is only the container's name,
    and the optimizer's slots of each part (``Adagrad/accumulator/user_emb/part_1``) are
    separate variables of one slot."""
    groups: dict[str, list[int]] = {}  # variable -> indices in ``shards`` of its parts
    named = list(shards)  # a variable that is not partitioned stays as it is
    for number, shard in enumerate(shards):
        if match := _PART.search(shard.name):
            if shard.num_shards > 1:  # a part of a ShardedVariable: it knows its own count
                named[number] = dataclasses.replace(shard, variable=shard.name[:match.start()])
            else:  # a slot of one part: grouped with the slots of the other parts by name
                groups.setdefault(shard.name[:match.start()], []).append(number)
    for variable, numbers in groups.items():
        for number in numbers:
            shard = shards[number]
            match = _PART.search(shard.name)
            assert match is not None
            named[number] = dataclasses.replace(shard, variable=variable, shard=int(match[1]),
                                                num_shards=len(numbers))
    return named


def _name(variable: Any) -> str:
    return str(getattr(variable, "name", "variable")).split(":")[0]


def _report_steps() -> None:
    """One ``step`` event a second while the count of finished functions moves."""
    while True:
        time.sleep(STEP_INTERVAL)
        emit_step()
        emit_functions()


def emit_functions(final: bool = False) -> None:
    """The coordinator's anatomy of its functions since the last (at most every
    :data:`trainer.shim.functions.INTERVAL` seconds, or now when ``final``)."""
    with _Tracker.lock:
        finished = _Tracker.finished
    event = functions.anatomy(STATE.role, STATE.index, STATE.global_step, finished, final)
    if event is not None:
        lifecycle.emit(event)


def emit_step() -> None:
    """A ``step`` event for the batches run since the last one (none if none, or if the
    program reports its own steps: its figures win)."""
    with _Tracker.emit_lock:
        with _Tracker.lock:
            finished = _Tracker.finished
            idle = finished >= _Tracker.scheduled
            by_worker = dict(_Tracker.by_worker)
        step = _batches(finished)
        STATE.global_step = max(STATE.global_step, step)
        last_step, last_time = _Tracker.mark
        # The step variable counts the batches of functions still running too, as of the
        # read: paired with the read's time. With none running, every batch counted was done
        # by the time the last function finished: a read that waited (the coordinator busy
        # at the end of model.fit) must not stretch the step's time.
        now = time.monotonic()
        if idle and last_time < _Tracker.finished_at < now:
            now = _Tracker.finished_at
        if step <= last_step:
            return
        _Tracker.mark = (step, now)
        # The first count's time runs from the first schedule: it holds the tracing of the
        # program's function and its datasets' creation (a steps_per_execution program's
        # first "337 ex/s" for 1,185): no rate is claimed until a second count.
        step_time = 0.0 if last_step == 0 else round((now - last_time) / (step - last_step), 6)
        if _reported_recently():
            return
        workers = tuple(by_worker.get(i, 0) for i in range(max(by_worker, default=-1) + 1))
        lifecycle.emit(protocol.Step(role=STATE.role, index=STATE.index, global_step=step,
                                     local_step=step, loss=None, examples_per_sec=0.0,
                                     step_time=step_time,
                                     coordinator=True, by_worker=workers))


def _batches(finished: int) -> int:
    """Batches trained so far: the step variable's value, else the functions finished."""
    variable = _Tracker.step_variable
    if variable is None:
        with _Tracker.lock:
            variables = list(_Tracker.variables)
        variable = _Tracker.step_variable = step_variable(variables)
    if variable is not None:
        try:
            return int(variable.numpy())
        except Exception:  # a ps away for a moment: the functions' count meanwhile
            return max(finished, _Tracker.mark[0])
    return finished


def step_variable(variables: list[Any]) -> Any:
    """The variable among ``variables`` that counts batches (a scalar integer named as in
    :data:`STEP_VARIABLES`), or None."""
    found: dict[str, Any] = {}
    for variable in variables:
        dtype = getattr(variable, "dtype", None)
        if not getattr(dtype, "is_integer", False) or tuple(getattr(variable, "shape", (1,))) != ():
            continue
        found.setdefault(_name(variable).rsplit("/", 1)[-1], variable)
    return next((found[name] for name in STEP_VARIABLES if name in found), None)


def read_final() -> None:
    """The last count, in a ``step`` event, before ``done`` (the program has joined)."""
    if _Tracker.scheduled:
        emit_step()
        emit_functions(final=True)


def _placement_reported() -> bool:
    """The program reported its placement itself through ``tfdist_report``: its own stands."""
    report = sys.modules.get("tfdist_report")
    return bool(getattr(report, "placement_reported", False)) if report is not None else False


def _reported_recently() -> bool:
    report = sys.modules.get("tfdist_report")
    last = getattr(report, "last_step_report", 0.0) if report is not None else 0.0
    return isinstance(last, float) and time.monotonic() - last < 2 * STEP_INTERVAL
