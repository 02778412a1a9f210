"""``python -m trainer.shim script.py args...``: see :mod:`trainer.shim` for the contract."""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Sequence

from trainer import lifecycle, protocol, threads
from trainer.shim import REPORT_DIR, hooks, progress
from trainer.shim.state import STATE, soft

USAGE = "usage: python -m trainer.shim script.py [args...]"
#: How long the program's own atexit handlers may take before the task exits anyway.
ATEXIT_SECONDS = 5.0


def main(argv: Sequence[str] | None = None) -> None:
    """Run the script as ``__main__`` under the hooks and exit with its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        lifecycle.exit_now(lifecycle.EXIT_USAGE if not args else lifecycle.EXIT_OK)
    script = args[0]
    if not os.path.isfile(script):
        print(f"tfdist shim: error: {script}: no such file", file=sys.stderr)
        lifecycle.exit_now(lifecycle.EXIT_USAGE)
    threads.pin(threads.from_env())  # resources.pin: before the program starts any thread
    lifecycle.on_stdin_line(b"end", STATE.end.set)
    lifecycle.watch_parent("auto")
    _set_path(script)
    hooks.arm()
    sys.argv = [script, *args[1:]]
    lifecycle.exit_now(_run(script))


def _set_path(script: str) -> None:
    """As ``python script.py`` would: the script's folder first (in place of the folder
    ``-m`` put there), then the reporting module's."""
    folder = os.path.dirname(os.path.abspath(script))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)
    if str(REPORT_DIR) not in sys.path:
        sys.path.insert(1, str(REPORT_DIR))


def _run(script: str) -> int:
    """The script's exit status; ``done`` or ``error`` emitted accordingly."""
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException as exc:
        traceback.print_exc()
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        lifecycle.emit(protocol.Error(role=STATE.role, index=STATE.index,
                                      type=type(exc).__name__, message=message))
        code = lifecycle.EXIT_FAILED
    if code == 0:
        soft("the final step read", progress.read_final)
        lifecycle.emit(protocol.Done(role=STATE.role, index=STATE.index,
                                     reason=protocol.REASON_PROGRAM_ENDED,
                                     global_step=STATE.global_step))
    _run_atexit()
    return code


def _exit_status(code: object) -> int:
    """What Python makes of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_atexit() -> None:
    """The program's atexit handlers, bounded: the task then leaves without Python's
    teardown, which TF1 distributed sessions can block for minutes (as the trainer does)."""
    runner = threading.Thread(target=atexit._run_exitfuncs, name="tfdist-shim-atexit",
                              daemon=True)
    runner.start()
    runner.join(ATEXIT_SECONDS)


if __name__ == "__main__":
    main()
