"""How a task talks and how it ends: event output, exits that never hang, and dying with
the controller that started it."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TextIO

from trainer import protocol

#: Exit codes of the trainer: the task contract in :mod:`trainer.protocol`.
EXIT_OK = protocol.EXIT_OK
EXIT_FAILED = protocol.EXIT_FAILED
EXIT_USAGE = protocol.EXIT_USAGE
EXIT_ORPHANED = protocol.EXIT_ORPHANED

_emit_lock = threading.Lock()
PROCESS_START = time.time()

# What TensorFlow's C++ runtime writes to fd 2 on a machine without GPUs, at levels its
# TF_CPP_MIN_LOG_LEVEL does not cover (messages logged before absl is initialised).
_STDERR_NOISE = re.compile(
    r"All log messages before absl::InitializeLog|oneDNN custom operations|cudart_stub|"
    r"Could not find cuda drivers|cpu_feature_guard|To enable the following instructions|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|TF-TRT Warning|"
    r"[EW]0000 00:00:\S+\s+\d+ \S*(cuda|gpu)\S*\.cc")
_stderr_forwarder: threading.Thread | None = None
_go = threading.Event()
GO_LINE = b"go"
STOP_LINE = protocol.STOP_LINE.encode()
#: Other stdin lines a program reacts to (the shim's ``end``), by their stripped bytes.
_line_handlers: dict[bytes, Callable[[], None]] = {}
_stdin_watched = threading.Event()


class LineEnds:
    """A text stream (a program's ``sys.stdout``) that knows whether its last write left a
    line open: ``print(x, end="")`` just before an event would glue the event to the
    program's text, and both would be lost to the controller. Everything else is the
    stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        #: The last write did not end its line.
        self.mid_line = False

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        if text:
            self.mid_line = not text.endswith("\n")
        return written

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def track_line_ends() -> None:
    """Make ``sys.stdout`` a :class:`LineEnds` (the shim, before the user's program runs):
    an event then always starts a line of its own."""
    if sys.stdout is not None and not isinstance(sys.stdout, LineEnds):
        sys.stdout = LineEnds(sys.stdout)


def emit(event: protocol.Event) -> None:
    """Write one event line to stdout, whole and on a line of its own, from any thread."""
    line = event.to_json() + "\n"
    with _emit_lock:
        if getattr(sys.stdout, "mid_line", False):
            line = "\n" + line  # the program's own line ends here, as it would at exit
        sys.stdout.write(line)
        sys.stdout.flush()


def log(text: str) -> None:
    """A plain log line on stdout, ordered with the events."""
    with _emit_lock:
        opened = "\n" if getattr(sys.stdout, "mid_line", False) else ""
        sys.stdout.write(opened + text.rstrip("\n") + "\n")
        sys.stdout.flush()


def filter_stderr() -> None:
    """Route fd 2 through a thread that drops TensorFlow's start-up noise (oneDNN banners,
    CUDA probes on CPU-only machines) and passes every other line on unchanged."""
    global _stderr_forwarder
    if _stderr_forwarder is not None:
        return
    sys.stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as pipe, os.fdopen(real, "wb", buffering=0) as out:
            for line in pipe:
                if not _STDERR_NOISE.search(line.decode("utf-8", "replace")):
                    out.write(line)

    _stderr_forwarder = threading.Thread(target=forward, name="stderr-filter", daemon=True)
    _stderr_forwarder.start()
    # An uncaught exception (e.g. a ModuleNotFoundError importing TensorFlow with the wrong
    # python) is printed to fd 2 at exit, and a daemon forwarder would die before passing it
    # on: the task would end with no stderr at all. Print it, then leave through exit_now,
    # which waits for the forwarder.
    sys.excepthook = _report_and_exit


def _report_and_exit(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    sys.__excepthook__(kind, value, tb)
    exit_now(EXIT_FAILED)


def exit_now(code: int) -> None:
    """Flush and leave without Python's teardown: gRPC and session threads of a
    distributed TF1 session can block interpreter shutdown for minutes."""
    try:
        with _emit_lock:
            sys.stdout.flush()
        sys.stderr.flush()
        if _stderr_forwarder is not None:
            os.close(2)  # the forwarder sees EOF once it has passed on every line
            _stderr_forwarder.join(timeout=1.0)
    finally:
        os._exit(code)


#: Lines of a TensorFlow error message that wrap the status rather than say what went wrong.
_TF_WRAPPING = re.compile(
    r"Graph execution error:|Detected at node .* \(most recent call last\):|\s+File \"|"
    r"Node: '|\s*\[\[\{\{node |Hint: |Original stack trace for ")


def root_cause(message: str) -> str:
    """The status message of a TensorFlow error, whole, on one line. TF wraps it in a header
    ("Graph execution error:"), the Python stack that built the failing node and hints; the
    first line alone never says "No space left on device"."""
    kept: list[str] = []
    in_stack = False
    for line in message.splitlines():
        if line.startswith("Original stack trace for "):
            break  # str(error) appends the whole construction stack
        if line.startswith("Detected at node "):
            in_stack = True
            continue
        if in_stack and (line.startswith((" ", "\t")) or not line.strip()):
            continue  # the indented stack of the "Detected at node" block
        in_stack = False
        if line.strip() and not _TF_WRAPPING.match(line):
            kept.append(line.strip())
    return "; ".join(kept) or message.strip().replace("\n", " ")


def fail_usage(message: str, role: str = "", index: int = 0) -> None:
    """One line on stderr, an ``error`` event on stdout, exit 2."""
    emit(protocol.Error(role=role, index=index, type="usage", message=message))
    print(f"trainer: error: {message}", file=sys.stderr)
    exit_now(EXIT_USAGE)


def hold(role: str, index: int) -> None:
    """Announce ``loaded`` and block until the controller writes ``go`` on stdin."""
    emit(protocol.Loaded(role=role, index=index, pid=os.getpid(),
                         seconds=round(time.time() - PROCESS_START, 3)))
    _go.wait()


def on_stdin_line(line: bytes, handler: Callable[[], None]) -> None:
    """Call ``handler`` (on the stdin thread) whenever the controller writes ``line``.
    Register before :func:`watch_parent`; it only acts when stdin is watched."""
    _line_handlers[line] = handler


def stdin_watched() -> bool:
    """Whether :func:`watch_parent` reads stdin (so the controller can write to it)."""
    return _stdin_watched.is_set()


def watch_parent(mode: str = "auto") -> None:
    """Exit when the controller goes away, even if it was SIGKILLed.

    Two signals, because each misses a case: the kernel's parent-death signal (local
    launches; it fires when the parent process dies) and EOF on stdin, when stdin is a pipe
    or socket (the controller holds the other end; over SSH the channel closes when the
    connection drops). A terminal or /dev/null on stdin is not watched."""
    if mode == "no":
        return
    _set_parent_death_signal()
    try:
        kind = os.fstat(0).st_mode
    except OSError:
        return
    if mode == "yes" or stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind):
        _stdin_watched.set()
        threading.Thread(target=_exit_on_stdin_eof, name="stdin-watch", daemon=True).start()


def _set_parent_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        # SIGKILL, not SIGTERM: a stopped task (SIGSTOP, a debugger) keeps a SIGTERM pending
        # until it is continued, which after its controller's death is never; SIGKILL ends a
        # stopped process too. Nothing is lost: SIGTERM's default action was to die as well.
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    # The parent may have died between fork and prctl.
    if os.getppid() == 1:
        exit_now(EXIT_ORPHANED)


def _exit_on_stdin_eof() -> None:
    stopped = False
    try:
        with os.fdopen(0, "rb", buffering=0, closefd=False) as stdin:
            for line in stdin:
                text = line.strip()
                if text == GO_LINE:
                    _go.set()
                elif text == STOP_LINE:
                    stopped = True
                elif text in _line_handlers:
                    _line_handlers[text]()
    except OSError:
        pass
    why = "the controller stops it" if stopped else "the controller went away"
    print(f"trainer: stdin closed ({why}); exiting", file=sys.stderr)
    exit_now(EXIT_ORPHANED)
