"""The forked task: turn a copy of the fork server into the process a cold start would have
made (``python -m trainer ...`` or ``python -m trainer.shim ...``), then run it.

Everything here runs in the child between ``fork`` and the task's ``main``; it never returns
into the server's loop: every path ends in ``os._exit``."""

from __future__ import annotations

import ctypes
import io
import os
import runpy
import signal
import sys
import traceback
from collections.abc import Iterable
from typing import Any

from trainer.shim import BOOTSTRAP
from trainer.warm import COLD_NOTICE, IMPORT_CHOOSING_ENV, MODES, POOL_ENV, ROOM_ENV, wire

_PR_SET_PDEATHSIG = 1


def become_task(request: wire.Request, fds: list[int], module: str, server_pid: int,
                server_fds: Iterable[int], base_path: list[str]) -> None:
    """Set the child up as a cold task of ``module`` and run it. Never returns."""
    code = 1
    try:
        _own_session(server_pid)
        _take_streams(fds, server_fds)
        _announce(request)
        _reset_signals()
        if request.cwd:
            os.chdir(request.cwd)
            _moved_to(request.cwd)
        _set_environment(request.env)
        shadowed = _shadowed(module, request.argv)
        if shadowed:
            _exec_cold(module, request.argv, f"the program's folder has {', '.join(shadowed)}, "
                                             "which the warm pool had imported already")
        chosen = _chosen_by_program(module, request.argv, request.env)
        if chosen:
            _exec_cold(module, request.argv, f"the program sets {', '.join(chosen)} itself, which "
                                             "TensorFlow reads when it is imported (the warm pool "
                                             "imported it without)")
        _show_environment()
        _apply_thread_counts()
        sys.argv = [module, *request.argv]
        sys.path[:] = _task_path(base_path, request.env)
        _reset_trainer_clock()
        code = _run(module)
    except BaseException:  # a failure setting up: say it on the task's own stderr
        try:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(code)
    os._exit(code)


def _own_session(server_pid: int) -> None:
    """As ``start_new_session=True`` and the launcher's pre-exec hook: a session and process
    group of its own, and SIGKILL when its parent dies. Its parent is the server, which
    itself dies with the controller (its own death signal, and EOF on its stdin), so a
    SIGKILLed controller takes the server and with it every task."""
    os.setsid()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != server_pid:  # the server died between fork and prctl
        os._exit(143)


def _take_streams(fds: list[int], server_fds: Iterable[int]) -> None:
    """The task's stdin/stdout/stderr on 0/1/2; nothing of the server's kept open (its
    socket, its own stdio pipes: the controller must see EOF when the task ends)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # dup2 clears close-on-exec: 0/1/2 stay as a cold task has them
    for fd in {*fds, *server_fds}:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding = sys.stdout.encoding if sys.stdout is not None else "utf-8"
    # New text streams over the new descriptors, buffered the way Python's start-up would
    # buffer them (line-buffered on a terminal, write-through with PYTHONUNBUFFERED).
    stdin_raw = open(0, "rb", closefd=False)  # noqa: SIM115 (the task's stdin for its life)
    sys.stdin = io.TextIOWrapper(stdin_raw, encoding=encoding, errors="strict")
    sys.stdout = _writer(1, encoding, "strict", unbuffered)
    sys.stderr = _writer(2, encoding, "backslashreplace", True)
    # The originals too (faulthandler, a program restoring sys.stdout): they are final to
    # the type checker, not to Python.
    for name in ("stdin", "stdout", "stderr"):
        setattr(sys, f"__{name}__", getattr(sys, name))


def _announce(request: wire.Request) -> None:
    """The pid line a client asked for (:data:`trainer.warm.wire.PID_LINE`), the first bytes
    of the task's stdout: whoever reads it learns the task's pid before any of its output."""
    text = request.extra.get(wire.PID_LINE)
    if not isinstance(text, str):
        return
    data = text.replace("{pid}", str(os.getpid())).encode("utf-8", "replace")
    while data:
        data = data[os.write(1, data):]


def _writer(fd: int, encoding: str, errors: str, unbuffered: bool) -> io.TextIOWrapper:
    tty = os.isatty(fd)
    raw = open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)  # noqa: SIM115
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors,
                            line_buffering=tty or fd == 2, write_through=unbuffered)


def _reset_signals() -> None:
    """The dispositions a fresh interpreter has (SIGPIPE ignored, as Python starts) and no
    wake-up fd: the server's SIGCHLD handling is its own."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _moved_to(cwd: str) -> None:
    """The task's folder is where multiprocessing finds a relative ``__main__`` for its
    spawn and forkserver children (``process.ORIGINAL_DIR``, fixed when it was imported: in
    the pool, in the pool's folder)."""
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        process.ORIGINAL_DIR = os.path.abspath(cwd)  # type: ignore[attr-defined]


def _set_environment(env: dict[str, str]) -> None:
    """Exactly the request's environment (``putenv`` too, for TensorFlow's C++ getenv)."""
    wanted = {k: v for k, v in env.items() if k not in (POOL_ENV, ROOM_ENV)}
    for name in list(os.environ):
        if name not in wanted:
            del os.environ[name]
    os.environ.update(wanted)


def _shadowed(module: str, argv: tuple[str, ...]) -> list[str]:
    """Modules of a user's program (the files of its script's folder) that the pool has
    already imported as something else: a cold start would import the program's own
    (its folder comes first on ``sys.path``), a fork would find the pool's in
    ``sys.modules``. Only the shim runs other people's folders."""
    if module != MODES["shim"] or not argv:
        return []
    folder = os.path.dirname(os.path.abspath(argv[0]))
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    names = {e[:-3] for e in entries if e.endswith(".py")} | \
            {e for e in entries if os.path.isfile(os.path.join(folder, e, "__init__.py"))}
    loaded = {name.split(".")[0] for name in sys.modules}
    return sorted((names & loaded) - {"__main__"})


#: How much of a program's script :func:`_chosen_by_program` reads.
_SCRIPT_BYTES = 1 << 20


def _chosen_by_program(module: str, argv: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """Variables of :data:`trainer.warm.IMPORT_CHOOSING_ENV` that the program's script names
    and its environment does not set: a program setting one before its ``import tensorflow``
    gets, cold, the Keras (or backend) it asked for; forked, the pool's. A task whose
    environment sets it forks from a pool imported with it (the pool key holds it). Only a
    script's own text is read (a ``-m`` module is found only by importing its package)."""
    if module != MODES["shim"] or not argv or argv[0] == "-m":
        return []
    try:
        with open(argv[0], "rb") as f:
            text = f.read(_SCRIPT_BYTES)
    except OSError:
        return []
    return [name for name in IMPORT_CHOOSING_ENV if name not in env and name.encode() in text]


def _exec_cold(module: str, argv: tuple[str, ...], why: str) -> None:
    """Become a cold task in place (same pid, session, streams and parent-death signal)."""
    os.write(2, f"{COLD_NOTICE}{why}\n".encode())
    # The shim as the controller starts it (trainer.shim.BOOTSTRAP): ``-m trainer.shim`` would
    # put the working folder first, where the program's own ``trainer`` would take the name.
    start = ["-c", BOOTSTRAP] if module == MODES["shim"] else ["-m", module]
    os.execv(sys.executable, [sys.executable, *start, *argv])


def _show_environment() -> None:
    """Write the task's environment where /proc/PID/environ reads it: the block the server
    was exec'd with (the server made it roomy: :data:`trainer.warm.ROOM_ENV`). The leftover
    sweep and people (``cat /proc/PID/environ``) then see the task's run id and controller,
    not the pool's. Safe once :func:`_set_environment` has run: every variable libc still
    knows was set anew (``setenv`` copies it), so nothing points into the old block. A task
    whose environment does not fit keeps the pool's (the sweep still knows it by that)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50, 51
    except (OSError, IndexError, ValueError):
        return
    block = b"".join(f"{k}={v}".encode("utf-8", "surrogateescape") + b"\0" for k, v in os.environ.items())
    if not 0 < start < end or len(block) >= end - start:
        return
    ctypes.memmove(start, block + b"\0" * (end - start - len(block)), end - start)


#: The OpenMP/BLAS libraries the pool loaded (a ``threadpoolctl.ThreadpoolController``), found
#: once in the pool by :func:`prepare_thread_limits`: finding them walks every loaded library
#: (TensorFlow's hundreds), 20 ms of CPU that each forked task paid again after its fork,
#: while a cold task's libraries read ``OMP_NUM_THREADS`` for free when they load.
_loaded_pools: Any = None


def prepare_thread_limits() -> None:
    """Find the loaded OpenMP/BLAS libraries now, in the pool, for every task it forks (none
    are loaded after the pool's preload; a library a task loads itself reads the variable)."""
    global _loaded_pools
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return
    _loaded_pools = ThreadpoolController()


def _apply_thread_counts() -> None:
    """``OMP_NUM_THREADS`` is read by OpenMP and OpenBLAS when they load, in the pool; apply
    the task's own value to the loaded libraries now (TensorFlow's pools read their
    variables at first use and need nothing)."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not text.isdigit() or int(text) < 1:
        return
    if _loaded_pools is not None:
        _loaded_pools.limit(limits=int(text))
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=int(text))


def _task_path(base_path: list[str], env: dict[str, str]) -> list[str]:
    """``sys.path`` as ``python -m`` would build it in the task's folder: the working folder,
    the task's PYTHONPATH, then the interpreter's own entries (``base_path``)."""
    extra = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = [os.getcwd(), *extra]
    return path + [p for p in base_path if p not in path]


def _reset_trainer_clock() -> None:
    """The trainer's ``loaded`` event reports seconds since the process started: since the
    fork, for a warm task."""
    import time

    from trainer import lifecycle

    lifecycle.PROCESS_START = time.time()
    loop = sys.modules.get("trainer.loop")
    if loop is not None:  # it imported the value, not the module
        loop.PROCESS_START = lifecycle.PROCESS_START  # type: ignore[attr-defined]


def _run(module: str) -> int:
    """Run ``module`` as ``__main__`` (what ``-m`` does); its exit status. The trainer and
    the shim leave through ``os._exit`` themselves; this covers a return or an exception."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code & 0xFF
