"""Remote sweep for tasks of earlier runs: processes whose environment holds the run-id
variable (``TFDIST_RUN_ID``, :data:`tui.plan.tasks.RUN_ID_ENV`).

``python -c SOURCE find VAR OWNER_VAR`` lists them, each with OWNER_VAR's value (our own
processes only, unless we are root).
``python -c SOURCE stop VAR GRACE PID=RUNID...`` stops them: SIGTERM to the process group
when the task leads one (as every task we launch does), SIGKILL after GRACE seconds. A pid is
only signalled while it still carries the same run id, so a reused pid is left alone."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

RESULT_PREFIX = "tfdist-result "


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def environ_value(pid: int, var: str) -> str | None:
    prefix = (var + "=").encode()
    try:
        for entry in read(f"/proc/{pid}/environ").split(b"\0"):
            if entry.startswith(prefix):
                return entry[len(prefix):].decode("utf-8", "replace")
    except OSError:
        pass
    return None


def run_id(pid: int, var: str) -> str | None:
    return environ_value(pid, var)


def stat(pid: int) -> tuple[str, int] | None:
    """State letter and process group of ``pid``, or None if it is gone."""
    try:
        text = read(f"/proc/{pid}/stat").decode("utf-8", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the name in (...) may hold spaces
    return fields[0], int(fields[2])


def alive(pid: int) -> bool:
    state = stat(pid)
    return state is not None and state[0] not in ("Z", "X")


def find(var: str, owner_var: str) -> list[dict[str, object]]:
    me = os.getpid()
    uid = os.getuid()
    found: list[dict[str, object]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue  # another user's (root may read them all): not ours to report or stop
        except OSError:
            continue
        tag = run_id(pid, var)
        state = stat(pid)
        if tag is None or state is None or state[0] in ("Z", "X"):
            continue
        try:
            cmdline = [a.decode("utf-8", "replace") for a in read(f"/proc/{pid}/cmdline").split(b"\0")]
        except OSError:
            continue
        while cmdline and not cmdline[-1]:
            cmdline.pop()
        found.append({"pid": pid, "pgid": state[1], "run_id": tag, "cmdline": cmdline,
                      "controller": environ_value(pid, owner_var)})
    return found


def signal_task(pid: int, sig: int) -> None:
    state = stat(pid)
    try:
        if state is not None and state[1] == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except OSError:
        pass


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.time() + seconds
    while True:
        left = [pid for pid in pids if alive(pid)]
        if not left or time.time() >= deadline:
            return left
        time.sleep(0.05)


def stop(var: str, grace: float, targets: dict[int, str]) -> dict[str, str]:
    outcome: dict[str, str] = {}
    ours = []
    for pid, tag in targets.items():
        if run_id(pid, var) != tag or not alive(pid):
            outcome[str(pid)] = "gone"
        else:
            ours.append(pid)
    for pid in ours:
        signal_task(pid, signal.SIGTERM)
    left = wait_gone(ours, grace)
    for pid in ours:
        outcome[str(pid)] = "stopped"
    for pid in left:
        signal_task(pid, signal.SIGKILL)
        outcome[str(pid)] = "killed"
    for pid in wait_gone(left, 5.0):
        outcome[str(pid)] = "survived"
    return outcome


def main(argv: list[str]) -> None:
    if argv[:1] == ["find"]:
        # The owner variable names the task's controller; the controller judges whether
        # that one still lives (it may run on another machine).
        print(RESULT_PREFIX + json.dumps(find(argv[1], argv[2] if len(argv) > 2 else "")))
    elif argv[:1] == ["stop"]:
        targets = {}
        for word in argv[3:]:
            pid, _, tag = word.partition("=")
            targets[int(pid)] = tag
        print(RESULT_PREFIX + json.dumps(stop(argv[1], float(argv[2]), targets)))
    else:
        sys.exit("usage: find VAR [OWNER_VAR] | stop VAR GRACE PID=RUNID...")


if __name__ == "__main__":
    main(sys.argv[1:])
