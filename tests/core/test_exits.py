"""How a task's exit is said: the error it died of is named beside its code."""

from __future__ import annotations

from tui.core.exits import ERROR_CHARS, ExitInfo, last_error


def test_the_last_error_of_a_traceback_is_named_without_its_module() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "trainer/loop.py", line 10, in run',
        "tensorflow.python.framework.errors_impl.UnavailableError: Socket closed",
        "During handling of the above exception, another exception occurred:",
        "tensorflow.python.framework.errors_impl.AbortedError: The same RunGraph (Worker) request "
        "was received twice. step_id=1",
        "worker0 | exiting",
    ]
    assert last_error(lines) == ("AbortedError: The same RunGraph (Worker) request was received "
                                 "twice. step_id=1")
    assert last_error(["SystemExit: 3"]) == "SystemExit: 3"
    assert last_error(["step 10 loss 2.3", "Error: not a Python exception's line"]) == ""
    assert last_error(["Exception: URL fetch failure on https://x/mnist.npz"]) == \
        "Exception: URL fetch failure on https://x/mnist.npz"  # raise Exception(...)
    long = last_error(["ValueError: " + "x" * 400])
    assert long.endswith("...") and len(long) == ERROR_CHARS + 3


def test_a_reason_that_starts_with_how_is_said_once() -> None:
    info = ExitInfo(1, "exited with code 1 (AbortedError: twice)")
    assert info.detail() == "exited with code 1 (AbortedError: twice)"
    assert ExitInfo(-9, "stalled").detail() == "was killed by SIGKILL (stalled)"
