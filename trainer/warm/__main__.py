"""``python -m trainer.warm MODE``: the fork server (see :mod:`trainer.warm`).

Prints ``{"ready": SOCKET, "pid": PID, "seconds": IMPORT_SECONDS, "tf_version": VERSION}`` on
stdout once it serves (the version lets a host check skip an import of its own), or
``{"failed": WHY}`` and exits 1. Exits when stdin reaches EOF; dies with its parent
(PR_SET_PDEATHSIG), taking its tasks along (theirs is tied to it)."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence

from trainer import lifecycle
from trainer.tfimport import collector_paused
from trainer.warm import MODES, POOL_ENV, ROOM_BYTES, ROOM_ENV, TRAINER_QUIET_ENV, effective_import_env
from trainer.warm import server as server_mod
from trainer.warm.child import prepare_thread_limits

#: What each mode imports ahead of its tasks: TensorFlow and the modules its tasks import
#: after it (not the ``__main__`` modules: runpy runs those afresh in each task). None of
#: them makes a device, a session or an eager context at import.
PRELOAD: dict[str, tuple[str, ...]] = {
    "trainer": ("tensorflow", "tensorflow.compat.v1", "trainer.cluster", "trainer.settings",
                "trainer.protocol", "trainer.lifecycle", "trainer.tfimport",
                "trainer.loop", "trainer.graph", "trainer.models", "trainer.data",
                "trainer.placement", "trainer.threads", "trainer.portclaim", "sklearn.datasets"),
    "shim": ("tensorflow", "tensorflow.compat.v1", "tensorflow.python.training.server_lib",
             "tensorflow.python.training.session_manager", "trainer.threads",
             "trainer.shim.hooks", "trainer.shim.progress", "trainer.shim.state"),
}


#: Preloaded when installed: the digits dataset's loader (scikit-learn takes 1-3 s to import).
OPTIONAL = frozenset({"sklearn.datasets"})


def _emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _preload(mode: str) -> None:
    if mode == "trainer":
        # As trainer.tfimport.import_tf does before it imports, so the pool's import-time
        # values are those of a quiet trainer task.
        for name, value in TRAINER_QUIET_ENV.items():
            os.environ.setdefault(name, value)
    with collector_paused():
        for name in PRELOAD[mode]:
            try:
                importlib.import_module(name)
            except ImportError:
                if name in OPTIONAL:
                    continue  # a task that needs it imports it (and fails) as a cold one would
                raise
        if mode == "trainer" and "sklearn.datasets" in sys.modules:
            from trainer import data

            data.preload()


def _check_untouched() -> str:
    """Why the pool is not safe to fork from ("" if it is): a device or an eager context
    made here would be shared, half-initialised, by every task."""
    from tensorflow.python.eager import context

    if context._context is not None and context._context._initialized:
        return "the eager context was initialised while preloading"
    with open("/proc/self/maps") as maps:
        if "libcuda.so" in maps.read():
            return "the CUDA driver was loaded while preloading"
    return ""


def _make_room() -> None:
    """Re-exec once with :data:`ROOM_ENV` in the environment (before anything is imported:
    a few tens of ms), so each task can show its own environment in /proc."""
    if ROOM_ENV in os.environ:
        return
    size = sum(len(k) + len(v) + 2 for k, v in os.environ.items())
    # POOL_ENV too, where /proc/PID/environ shows it: the pool's mark for tools and tests.
    env = {**os.environ, POOL_ENV: "1", ROOM_ENV: "x" * (size + ROOM_BYTES)}
    os.execve(sys.executable, [sys.executable, "-m", "trainer.warm", *sys.argv[1:]], env)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in MODES:
        print(f"usage: python -m trainer.warm {{{','.join(MODES)}}}", file=sys.stderr)
        lifecycle.exit_now(lifecycle.EXIT_USAGE)
    mode = args[0]
    _make_room()
    lifecycle.watch_parent("no")  # stdin is the server's own loop's to read
    lifecycle._set_parent_death_signal()
    started = time.time()
    try:
        _preload(mode)
    except Exception as exc:  # a broken TensorFlow install: the controller starts tasks cold
        _emit(failed=f"importing {mode}'s modules: {type(exc).__name__}: {exc}")
        lifecycle.exit_now(lifecycle.EXIT_FAILED)
    prepare_thread_limits()  # (before the check: it must leave the pool as safe to fork)
    why = _check_untouched()
    if why:
        _emit(failed=why)
        lifecycle.exit_now(lifecycle.EXIT_FAILED)
    folder = server_mod.make_folder()
    try:
        sock = server_mod.listen(folder)
    except OSError as exc:
        _emit(failed=f"cannot listen in {folder}: {exc}")
        lifecycle.exit_now(lifecycle.EXIT_FAILED)
    server = server_mod.Server(mode, folder, sock, effective_import_env(mode, [], os.environ),
                               server_mod.trainer_dir(), server_mod.base_path())
    tf_version = str(getattr(sys.modules.get("tensorflow"), "__version__", ""))
    _emit(ready=server.path, pid=os.getpid(), seconds=round(time.time() - started, 3), tf_version=tf_version)
    server.serve()
    # Told to end by SIGTERM: as the default action would have said, once cleaned up.
    lifecycle.exit_now(128 + signal.SIGTERM if server.stopping else lifecycle.EXIT_OK)


if __name__ == "__main__":
    main()
