"""The app's two kinds of core, for benchmarks that compare them side by side: on a thread of
the app's process (:class:`tui.app.bridge.CoreBridge`) and in a process of its own
(:class:`tui.app.process_bridge.ProcessBridge`, what ``tfdist-tui`` runs); and busy loops
beside them, for figures on a loaded machine."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import psutil

from tui.app.app import TfdistApp
from tui.app.bridge import Core, CoreBridge
from tui.app.process_bridge import ProcessBridge
from tui.core.options import RunOptions
from tui.core.session import Session
from tui.core.supervisor.records import SupervisorOptions

#: "process" is the app's default.
CORES = ("thread", "process")


def core_factory(kind: str, options: RunOptions,
                 supervisor_options: SupervisorOptions) -> Callable[[TfdistApp], Core]:
    """The app's ``core_factory`` for a core of ``kind``; both run the session the command
    line would (:meth:`Session.from_options`)."""
    if kind == "thread":
        return lambda _app: CoreBridge(lambda: Session.from_options(options, supervisor_options))
    if kind == "process":
        return lambda _app: ProcessBridge(options, supervisor_options)
    raise ValueError(f"a core is one of {', '.join(CORES)}, not {kind!r}")


def controller_rss_mb(app: TfdistApp) -> float:
    """Resident memory of the controller: the app's process, and its core's if apart."""
    total = psutil.Process().memory_info().rss
    if isinstance(app.core, ProcessBridge):
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(app.core.process.pid).memory_info().rss
    return total / 2**20


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes spinning on the CPU for as long as the block runs (a loaded
    machine); each killed by its pid at the end."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(loop.pid, signal.SIGKILL)
            loop.wait()


def add_load_arguments(parser: argparse.ArgumentParser, *, cores: bool = True) -> None:
    """The options every controller benchmark shares: ``--cores`` (which cores to compare,
    when it compares them) and ``--busy`` (busy loops beside it all: a loaded machine)."""
    if cores:
        parser.add_argument("--cores", type=core_list, default=CORES, help="thread,process (default both)")
    parser.add_argument("--busy", type=int, default=0, help="busy loops beside it all (a loaded machine)")


def core_list(text: str) -> tuple[str, ...]:
    """``--cores thread,process``: argparse's type."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in CORES]
    if unknown or not kinds:
        raise ValueError(f"cores are among {', '.join(CORES)}")
    return kinds
