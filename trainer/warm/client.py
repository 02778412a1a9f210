"""``python -m trainer.warm.client SOCKET MODE ARGS...``: start one task from the pool at
SOCKET with this process's stdin/stdout/stderr, environment and working folder, as if this
were ``python -m <MODE's module> ARGS...``. Standard library only, no TensorFlow: it starts in
a few tens of milliseconds.

Used where the controller cannot hand descriptors to the pool itself (a remote host: the
task's streams are the SSH channel's). The task's first stdout line is ``tfdist-pid PID warm``
(its pid, which leads its process group), written by the task itself before anything of its
own (:data:`trainer.warm.wire.PID_LINE`); the client waits, and exits as the task did
(killing itself with the task's signal). When the pool refuses the task or cannot be
reached, it prints its own pid and becomes the cold task (``exec``), with one line on stderr.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Sequence

from trainer.warm import COLD_NOTICE, MODES, wire

PID_PREFIX = "tfdist-pid "


def start(path: str, mode: str, argv: Sequence[str]) -> tuple[socket.socket | None, int | str]:
    """Ask the pool for a task: (connection, pid) or (None, why it was not served)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(30.0)
        sock.connect(path)
        request = wire.Request(tuple(argv), dict(os.environ), os.getcwd(),
                               extra={wire.PID_LINE: f"{PID_PREFIX}{{pid}} warm\n"})
        wire.send_request(sock, request, (0, 1, 2))
        first = _line(sock)
        answer = wire.parse_reply(first) if first else {"refused": "the pool closed the connection"}
    except (OSError, wire.WireError) as exc:
        sock.close()
        return None, f"the pool at {path} is unreachable: {exc}"
    if "pid" not in answer:
        sock.close()
        return None, str(answer.get("refused", "no pid in the answer"))
    return sock, int(answer["pid"])


def wait(sock: socket.socket) -> int:
    """The task's exit code, as the pool reports it (-9 when the pool itself died: its
    tasks die with it)."""
    sock.settimeout(None)
    line = _line(sock)
    sock.close()
    try:
        return int(wire.parse_reply(line)["exit"]) if line else -int(signal.SIGKILL)
    except (wire.WireError, KeyError, ValueError):
        return -int(signal.SIGKILL)


def _line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        more = sock.recv(4096)
        if not more:
            break
        data += more
    return data.strip()


def main(args: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if args is None else args)
    if len(argv) < 2 or argv[1] not in MODES:
        print("usage: python -m trainer.warm.client SOCKET MODE [ARGS...]", file=sys.stderr)
        sys.exit(2)
    path, mode, task_args = argv[0], argv[1], argv[2:]
    sock, pid = start(path, mode, task_args)
    if sock is None:
        print(f"{COLD_NOTICE}{pid}", file=sys.stderr, flush=True)
        print(f"{PID_PREFIX}{os.getpid()}", flush=True)
        os.execv(sys.executable, [sys.executable, "-m", MODES[mode], *task_args])
    # The task has our streams (and wrote its pid line on them); we only wait. Closing our
    # copies keeps EOF where it was.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    code = wait(sock)
    if code < 0:
        _die_by(-code)
    os._exit(code)


def _die_by(number: int) -> None:
    """End the way the task ended, killed by signal ``number``, so whoever waits on this
    client (sshd, the controller) sees that signal and not an exit code. SIGKILL and SIGSTOP
    have no handler to reset (``signal.signal`` refuses them, and its traceback made a warm
    task SIGKILLed on an SSH host read as "exit code 1"); a signal whose default is to be
    ignored ends us as a shell would say it, 128 + its number."""
    try:
        sig = signal.Signals(number)
    except ValueError:
        os._exit(128 + number)
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the task's core, not ours
    except (ImportError, OSError, ValueError):
        pass
    os.kill(os.getpid(), sig)
    os._exit(128 + number)  # still here: its default action is to be ignored


if __name__ == "__main__":
    main()
