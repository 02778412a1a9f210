"""The shim's entry point (``python -c BOOTSTRAP script.py args...`` or ``... -m module
args...``; ``python -m trainer.shim`` works too): see :mod:`trainer.shim` for the contract."""

from __future__ import annotations

import atexit
import importlib.util
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Sequence

from trainer import lifecycle, protocol, threads
from trainer.shim import REPORT_DIR, hooks, private, progress, steps, tf2
from trainer.shim.state import STATE, soft

USAGE = "usage: python -m trainer.shim (script.py | -m module) [args...]"
#: How long the program's own atexit handlers may take before the task exits anyway.
ATEXIT_SECONDS = 5.0


def main(argv: Sequence[str] | None = None) -> None:
    """Run the script (or ``-m module``) as ``__main__`` under the hooks and exit with its
    exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        lifecycle.exit_now(lifecycle.EXIT_OK)
    if not args or args == ["-m"]:
        print(USAGE, file=sys.stderr)
        lifecycle.exit_now(lifecycle.EXIT_USAGE)
    module = args[1] if args[0] == "-m" else None
    script = args[0] if module is None else ""
    rest = args[2:] if module is not None else args[1:]
    if module is None and not os.path.isfile(script):
        print(f"tfdist shim: error: {script}: no such file", file=sys.stderr)
        lifecycle.exit_now(lifecycle.EXIT_USAGE)
    threads.pin(threads.from_env())  # resources.pin: before the program starts any thread
    lifecycle.on_stdin_line(b"end", STATE.end.set)
    lifecycle.track_line_ends()
    lifecycle.watch_parent("auto")
    hooks.arm()
    # From here on nothing of ours may shadow the user's modules (a package called trainer).
    private.hide()
    _set_path(os.path.dirname(os.path.abspath(script)) if module is None else os.getcwd())
    STATE.program = module or os.path.basename(script)
    if module is not None:
        _check_module(module)
        sys.argv = [module, *rest]
    else:
        sys.argv = [script, *rest]
    lifecycle.exit_now(_run(script, module))


def _set_path(folder: str) -> None:
    """As ``python script.py`` (the script's folder) or ``python -m`` (the working folder)
    would: that folder first, then the reporting module's."""
    if sys.path and sys.path[0] in ("", os.curdir, os.getcwd()):
        del sys.path[0]  # what -c or -m put there; the folder below replaces it
    sys.path.insert(0, folder)
    if str(REPORT_DIR) not in sys.path:
        sys.path.insert(1, str(REPORT_DIR))


def _check_module(module: str) -> None:
    """Exit with a clear line, as for a missing script, when ``module`` cannot be found."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its package is missing or is not a package
        found = False
    if not found:
        print(f"tfdist shim: error: no module named {module} (looked in {os.getcwd()} and "
              f"on the path)", file=sys.stderr)
        lifecycle.exit_now(lifecycle.EXIT_USAGE)


def _run(script: str, module: str | None = None) -> int:
    """The program's exit status; ``done`` or ``error`` emitted accordingly."""
    try:
        if module is not None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            # Absolute, as python script.py makes __main__'s __file__ (since 3.9): multiprocessing's
            # spawn children import the script again by it.
            runpy.run_path(os.path.abspath(script), run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt as exc:
        _print_traceback(exc)
        code = 130
    except BaseException as exc:
        _print_traceback(exc)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        lifecycle.emit(protocol.Error(role=STATE.role, index=STATE.index,
                                      type=type(exc).__name__, message=message))
        code = lifecycle.EXIT_FAILED
    if code == 0:
        soft("the final step read", progress.read_final)
        soft("the final step read", tf2.read_final)
        lifecycle.emit(protocol.Done(role=STATE.role, index=STATE.index,
                                     reason=protocol.REASON_PROGRAM_ENDED,
                                     global_step=STATE.global_step,
                                     local_step=steps.own_steps() or 0))
    _run_atexit()
    return code


def _print_traceback(exc: BaseException) -> None:
    """``exc``'s traceback from the program's first frame on, as ``python script.py`` prints
    it: the frames of this module and runpy's that ran the program come first otherwise."""
    tb = exc.__traceback__
    ours = (os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>")
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


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
