"""The fork server's loop: one thread (the main one), so a fork copies no half-held lock of
ours, and the task's parent-death signal is tied to a thread that lives as long as the
server (PR_SET_PDEATHSIG fires when the forking *thread* ends).

No client can take the pool down, nor the tasks it forked: requests are read side by side without
blocking (a client sending a byte every few seconds delays nobody), each within one
deadline for the whole request; a request that is too big, too deep, malformed, or whose
fork fails (EAGAIN, ENOMEM) is refused alone, and its client starts the task cold. The
tasks the pool forked die only when the pool is told to end (EOF on stdin, SIGTERM)."""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from trainer.warm import MODES, effective_import_env, wire
from trainer.warm.child import become_task

#: Folder names of pools' sockets: ``tfdist-warm-<server pid>-<random>``.
DIR_PREFIX = "tfdist-warm-"
#: Seconds a client has for its whole request, from its connection on (clients send it at
#: once: a few ms).
REQUEST_SECONDS = 10.0
#: Requests read at once; one more is refused on the spot (its client starts cold).
MAX_PENDING = 32


@dataclass
class _Task:
    pid: int
    conn: socket.socket


@dataclass
class _Pending:
    """A connection whose request is still arriving."""

    conn: socket.socket
    reader: wire.RequestReader
    deadline: float


@dataclass
class Server:
    """A pool of one mode; :meth:`serve` runs until stdin reaches EOF or SIGTERM."""

    mode: str
    folder: Path
    sock: socket.socket
    import_env: dict[str, str | None]
    trainer_dir: str
    base_path: list[str]
    tasks: dict[int, _Task] = field(default_factory=dict)
    pending: dict[int, _Pending] = field(default_factory=dict)
    served: int = 0
    stopping: bool = False

    @property
    def path(self) -> str:
        return str(self.folder / "sock")

    def serve(self) -> None:
        """Accept requests, fork tasks, report their exits; return when the controller is
        gone (stdin EOF) or on SIGTERM, after SIGKILLing every task still running and
        removing the socket's folder."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)  # the wake-up fd ends the select
        signal.set_wakeup_fd(wake_w)
        self.sock.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ, "accept")
        selector.register(wake_r, selectors.EVENT_READ, "child")
        selector.register(0, selectors.EVENT_READ, "stdin")
        own_fds = [self.sock.fileno(), wake_r, wake_w, selector.fileno()]
        try:
            while not self.stopping:
                for key, _ in selector.select(self._wait_seconds()):
                    if key.data == "stdin":
                        if not os.read(0, 4096):
                            return
                    elif key.data == "child":
                        with contextlib.suppress(BlockingIOError):
                            os.read(wake_r, 4096)
                        self._reap()
                    elif key.data == "accept":
                        self._accept(selector)
                    else:
                        self._read(selector, key.fd, own_fds)
                self._expire(selector)
        finally:
            for pid in list(self.tasks):
                # The group, once the task has made it; the task alone before that.
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(self.folder, ignore_errors=True)

    def _on_term(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _wait_seconds(self) -> float | None:
        if not self.pending:
            return None
        return max(0.0, min(p.deadline for p in self.pending.values()) - time.monotonic())

    def _accept(self, selector: selectors.BaseSelector) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # none left (EAGAIN), or out of descriptors: those wait
                return
            if len(self.pending) >= MAX_PENDING:
                wire.reply(conn, refused=f"{MAX_PENDING} requests already arriving")
                conn.close()
                continue
            conn.setblocking(False)
            self.pending[conn.fileno()] = _Pending(conn, wire.RequestReader(),
                                                   time.monotonic() + REQUEST_SECONDS)
            selector.register(conn, selectors.EVENT_READ, "request")

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for fd, pending in list(self.pending.items()):
            if pending.deadline <= now:
                self._drop(selector, fd, f"bad request: not complete after {REQUEST_SECONDS:.0f} s")

    def _drop(self, selector: selectors.BaseSelector, fd: int, why: str) -> None:
        """Refuse the request arriving on ``fd`` and forget it (its client starts cold)."""
        pending = self.pending.pop(fd)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(pending.conn)
        pending.reader.close_fds()
        wire.reply(pending.conn, refused=why)
        pending.conn.close()

    def _read(self, selector: selectors.BaseSelector, fd: int, own_fds: list[int]) -> None:
        pending = self.pending.get(fd)
        if pending is None:
            return
        try:
            request = pending.reader.feed(pending.conn)
        except wire.WireError as exc:
            self._drop(selector, fd, f"bad request: {exc}")
            return
        except Exception as exc:  # anything else a request provokes fails that request only
            self._drop(selector, fd, f"bad request: {type(exc).__name__}: {exc}")
            return
        if request is None:
            return
        try:
            why = self._refusal(request)
            pid = 0 if why else self._fork(request, pending, own_fds)
        except OSError as exc:  # EAGAIN, ENOMEM: a pids limit, a full machine
            why = f"cannot fork: {exc.strerror or exc}"
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            why = f"the pool failed on it: {type(exc).__name__}: {exc}"
        if why:
            self._drop(selector, fd, why)
            return
        del self.pending[fd]
        selector.unregister(pending.conn)
        pending.reader.close_fds()
        self.served += 1
        self.tasks[pid] = _Task(pid, pending.conn)
        wire.reply(pending.conn, pid=pid)

    def _fork(self, request: wire.Request, pending: _Pending, own_fds: list[int]) -> int:
        # Everything of the server's and of other requests closes in the child: another
        # request's stdout held by this task would keep its reader from seeing EOF.
        server_fds = [*own_fds,
                      *(p.conn.fileno() for p in self.pending.values()),
                      *(fd for p in self.pending.values() if p is not pending for fd in p.reader.fds),
                      *(t.conn.fileno() for t in self.tasks.values())]
        server_pid = os.getpid()
        # SIGTERM blocked across the fork: until the child has reset its handlers, ours
        # (which only sets a flag) would swallow a SIGTERM meant for the new task; blocked,
        # it waits for the child's unmasking and then acts as it would on a cold task.
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
        try:
            pid = os.fork()
            if pid == 0:
                become_task(request, pending.reader.fds, MODES[self.mode], server_pid,
                            server_fds, self.base_path)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        return pid

    def _refusal(self, request: wire.Request) -> str:
        """Why this pool cannot run ``request`` as a cold start would; "" if it can."""
        wanted = effective_import_env(self.mode, request.argv, request.env)
        for name, value in wanted.items():
            if value != self.import_env.get(name):
                return f"{name} is {value!r} for the task, {self.import_env.get(name)!r} in the pool"
        for entry in request.env.get("PYTHONPATH", "").split(os.pathsep):
            # The trainer the pool imported must be the one the task's path finds first.
            if entry and os.path.isdir(os.path.join(entry, "trainer")):
                found = os.path.realpath(os.path.join(entry, "trainer"))
                if found != self.trainer_dir:
                    return f"the task's trainer is {found}, the pool's {self.trainer_dir}"
                break
        if request.cwd and not os.path.isdir(request.cwd):
            return f"no folder {request.cwd}"
        return ""

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            task = self.tasks.pop(pid, None)
            if task is None:
                continue
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            wire.reply(task.conn, exit=code)
            task.conn.close()


def make_folder() -> Path:
    """A private folder for the socket (mkdtemp makes it 0700), after removing those of
    pools that died without cleaning up (SIGKILLed with their controller)."""
    root = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    if not os.access(root, os.W_OK):
        root = Path(tempfile.gettempdir())
    for old in root.glob(DIR_PREFIX + "*"):
        try:
            pid = int(old.name[len(DIR_PREFIX):].split("-")[0])
            if old.stat().st_uid == os.getuid() and not Path(f"/proc/{pid}").exists():
                shutil.rmtree(old, ignore_errors=True)
        except (ValueError, OSError):
            continue
    return Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=root))


def listen(folder: Path) -> socket.socket:
    """The pool's socket, in ``folder`` (only its owner can reach it)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(folder / "sock"))
    sock.listen(64)
    sock.set_inheritable(False)
    return sock


def trainer_dir() -> str:
    """Where the ``trainer`` package this server imported lives."""
    import trainer

    return os.path.realpath(os.path.dirname(trainer.__file__ or ""))


def base_path() -> list[str]:
    """The interpreter's own ``sys.path`` entries: without the server's working folder and
    PYTHONPATH, which each task replaces with its own."""
    python_path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    own = {os.getcwd(), *(os.path.abspath(p) for p in python_path if p)}
    return [p for p in sys.path[1:] if p and os.path.abspath(p) not in own]
