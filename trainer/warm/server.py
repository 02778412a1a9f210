"""The fork server's loop: one thread (the main one), so a fork copies no half-held lock of
ours, and the task's parent-death signal is tied to a thread that lives as long as the
server (PR_SET_PDEATHSIG fires when the forking *thread* ends)."""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from trainer.warm import MODES, effective_import_env, wire
from trainer.warm.child import become_task

#: Folder names of pools' sockets: ``tfdist-warm-<server pid>-<random>``.
DIR_PREFIX = "tfdist-warm-"


@dataclass
class _Task:
    pid: int
    conn: socket.socket


@dataclass
class Server:
    """A pool of one mode; :meth:`serve` runs until stdin reaches EOF."""

    mode: str
    folder: Path
    sock: socket.socket
    import_env: dict[str, str | None]
    trainer_dir: str
    base_path: list[str]
    tasks: dict[int, _Task] = field(default_factory=dict)
    served: int = 0

    @property
    def path(self) -> str:
        return str(self.folder / "sock")

    def serve(self) -> None:
        """Accept requests, fork tasks, report their exits; return when the controller is
        gone (stdin EOF), after SIGKILLing every task still running."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ, "accept")
        selector.register(wake_r, selectors.EVENT_READ, "child")
        selector.register(0, selectors.EVENT_READ, "stdin")
        try:
            while True:
                for key, _ in selector.select():
                    if key.data == "stdin":
                        if not os.read(0, 4096):
                            return
                    elif key.data == "child":
                        with contextlib.suppress(BlockingIOError):
                            os.read(wake_r, 4096)
                        self._reap()
                    else:
                        self._accept(wake_r, wake_w)
        finally:
            for pid in list(self.tasks):
                # The group, once the task has made it; the task alone before that.
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(self.folder, ignore_errors=True)

    def _accept(self, wake_r: int, wake_w: int) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        conn.settimeout(10.0)  # a client sends its request right after connecting
        try:
            request, fds = wire.recv_request(conn)
        except (OSError, wire.WireError) as exc:
            wire.reply(conn, refused=f"bad request: {exc}")
            conn.close()
            return
        try:
            why = self._refusal(request)
            if why:
                wire.reply(conn, refused=why)
                conn.close()
                return
            server_fds = [self.sock.fileno(), wake_r, wake_w, conn.fileno(),
                          *(t.conn.fileno() for t in self.tasks.values())]
            server_pid = os.getpid()
            pid = os.fork()
            if pid == 0:
                become_task(request, fds, MODES[self.mode], server_pid, server_fds, self.base_path)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.served += 1
        self.tasks[pid] = _Task(pid, conn)
        wire.reply(conn, pid=pid)

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
