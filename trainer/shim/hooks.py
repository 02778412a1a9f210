"""The shim's hooks on TensorFlow's TF1 API, installed when the program imports
``tensorflow`` (never before: the shim itself does not import it).

Each patched method calls TensorFlow's own first and then the shim's addition inside
:func:`~trainer.shim.state.soft`, so a hook that fails costs one warning line, never the
program. Patches go on the classes (``server_lib.Server``, ``SessionManager``,
``ops.Graph``), so every alias (``tf.train.Server``, ``tf.distribute.Server``, the
``Supervisor``'s and ``MonitoredTrainingSession``'s session managers) is covered."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from trainer import lifecycle, protocol
from trainer.shim import progress, steps, tf2
from trainer.shim.state import STATE, as_dict, soft

#: The cap on ``SessionManager``'s poll (TensorFlow's default: 30 s).
RECOVERY_WAIT_SECS = 0.5
_installed = False


class _AfterTensorFlow(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` with the other finders and installs the hooks once its
    ``__init__`` has run."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "tensorflow":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            soft("installing the TensorFlow hooks", install)

        # An attribute of this loader instance only: other modules keep their loaders.
        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def arm() -> None:
    """Install the hooks now if TensorFlow is loaded, else when the program imports it."""
    if "tensorflow" in sys.modules:
        soft("installing the TensorFlow hooks", install)
    else:
        sys.meta_path.insert(0, _AfterTensorFlow())


def install() -> None:
    """Patch TensorFlow's classes. Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterTensorFlow)]
    from tensorflow.python.framework import ops
    from tensorflow.python.training import server_lib, session_manager

    soft("the server hook", lambda: _patch_server(server_lib.Server))
    soft("the session hook", lambda: _patch_session_manager(session_manager.SessionManager))
    soft("the graph hook", lambda: _patch_graph(ops.Graph))
    soft("the step hooks", steps.install)
    soft("the TF2 hooks", tf2.install)


def _patch_server(server: Any) -> None:
    original_start = server.start
    original_join = server.join

    @functools.wraps(original_start)
    def start(self: Any) -> None:
        original_start(self)
        soft("the ready hook", lambda: _on_started(self))

    @functools.wraps(original_join)
    def join(self: Any) -> None:
        soft("the coordinator check", _check_coordinated)
        # TensorFlow's join blocks forever (there is no remote shutdown, tensorflow#4713);
        # ours returns when the controller writes "end" on stdin.
        if not lifecycle.stdin_watched():
            original_join(self)
            return
        STATE.end.wait()
        _end_in_join()

    server.start = start
    server.join = join


def _end_in_join() -> None:
    """The controller ended the run: the task ends here, inside ``server.join()``. By hand
    join never returns, so what the program does after it (Kubeflow's TF1 dist-mnist falls
    through into the chief's Supervisor code) is never run by us either."""
    lifecycle.log(f"tfdist shim: {STATE.role}{STATE.index}: ended by the controller in server.join() "
                  "(which never returns by hand)")
    lifecycle.emit(protocol.Done(role=STATE.role, index=STATE.index, reason=protocol.REASON_ENDED_IN_JOIN,
                                 global_step=STATE.global_step))
    lifecycle.exit_now(lifecycle.EXIT_OK)


#: What the shim says when a worker only serves and nothing will coordinate it (the
#: controller's hint table knows these words: tui.core.hints).
NO_COORDINATOR = "serves (server.join()), and the cluster has no chief to coordinate it"


def _check_coordinated() -> None:
    """A worker that only serves is TF2's ParameterServerStrategy worker: without a chief in
    the cluster nothing ever schedules work on it, so say so at once (a TF1 worker trains;
    only its ps serve)."""
    if STATE.role == "worker" and STATE.cluster and "chief" not in STATE.cluster:
        lifecycle.log(f"tfdist shim: {STATE.role}{STATE.index} {NO_COORDINATOR}")


def _on_started(server: Any) -> None:
    if STATE.ready_sent:
        return
    definition = server.server_def
    from tensorflow.python.training import server_lib

    spec = server_lib.ClusterSpec(definition.cluster)
    cluster = as_dict(spec)
    job, index = definition.job_name, int(definition.task_index)
    STATE.learn(job, index, cluster)
    address = ""
    if job in cluster and index < len(cluster[job]):
        address = cluster[job][index]
    import tensorflow as tf

    STATE.ready_sent = True
    lifecycle.emit(protocol.Ready(role=job, index=index, pid=os.getpid(), address=address,
                                  tf_version=str(getattr(tf, "__version__", ""))))


def _patch_session_manager(manager: Any) -> None:
    original_init = manager.__init__
    original_prepare = manager.prepare_session
    original_wait = manager.wait_for_session

    @functools.wraps(original_init)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)

        def cap() -> None:
            # Only how often a waiting non-chief looks again: what it computes is unchanged.
            self._recovery_wait_secs = min(float(self._recovery_wait_secs), RECOVERY_WAIT_SECS)
        soft("the readiness-poll hook", cap)

    @functools.wraps(original_prepare)
    def prepare_session(self: Any, *args: Any, **kwargs: Any) -> Any:
        session = original_prepare(self, *args, **kwargs)
        soft("the session hook", lambda: progress.on_session(self._graph, session, True))
        return session

    @functools.wraps(original_wait)
    def wait_for_session(self: Any, *args: Any, **kwargs: Any) -> Any:
        session = original_wait(self, *args, **kwargs)
        if session is not None:
            soft("the session hook", lambda: progress.on_session(self._graph, session, False))
        return session

    manager.__init__ = init
    manager.prepare_session = prepare_session
    manager.wait_for_session = wait_for_session


def _patch_graph(graph: Any) -> None:
    original = graph.finalize

    @functools.wraps(original)
    def finalize(self: Any) -> None:
        original(self)
        soft("the placement hook", lambda: progress.on_graph(self))

    graph.finalize = finalize
