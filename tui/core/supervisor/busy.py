"""Whether a task that stopped moving is still working: the CPU time of its process group,
read twice from ``/proc`` on its host (this machine, or over the host's SSH connection).

The hang rule (:mod:`tui.core.supervisor.after_target`) ends a worker whose global step no longer
moves after the target was reached: the sync chief of tensorflow#13779, blocked on a
gradient that will never come, idles near 0 % of a core. A program that saves, exports or
evaluates after its last step uses far more, and ending it would lose that work."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Collection

from tui.config.cluster import HostSpec
from tui.launch.base import CommandRunner, LaunchError

#: A group using at least this many cores over the sample is working, not hung.
BUSY_CORES = 0.2
#: Every process's ``stat`` line; a process gone between the glob and its read is no error.
STAT_ARGV = ("sh", "-c", "cat /proc/[0-9]*/stat 2>/dev/null; exit 0")


def group_listing(word: str) -> str:
    """Shell text printing the ``stat`` lines of the processes of the groups that the shell
    word ``word`` names (" 12 34 "): the group is the 3rd field after the command name,
    which is in parentheses and may hold spaces or ")" (hence the last ") "). Where the host
    has no ``awk``, every line."""
    program = '{l = $0; sub(/^.*\\) /, ""); if (index(g, " " $3 " ")) print l}'
    keep = f"awk -v g={word} '{program}'"
    return f"cat /proc/[0-9]*/stat 2>/dev/null | if command -v awk >/dev/null 2>&1; then {keep}; else cat; fi"


def group_words(groups: Collection[int]) -> str:
    """``groups`` as :func:`group_listing` reads them."""
    return " " + " ".join(str(int(group)) for group in sorted(groups)) + " "


def stat_argv(groups: Collection[int]) -> tuple[str, ...]:
    """The ``stat`` lines of the processes of ``groups`` only, as :data:`STAT_ARGV` gives
    every process's: a host's few hundred processes were sent over its connection and
    parsed each time (64 hosts every 2 s: most of an idle controller's CPU)."""
    return ("sh", "-c", group_listing('"$1"') + "; exit 0", "sh", group_words(groups))


#: ``utime``/``stime`` are in clock ticks (100 a second on every Linux architecture, so a
#: remote host's are taken to be this machine's).
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(stat_lines: str, pgid: int) -> float | None:
    """CPU seconds (user + system) of the processes of group ``pgid`` among ``/proc/*/stat``
    lines; None when none of them is in it."""
    ticks, found = 0, False
    for line in stat_lines.splitlines():
        # The command name (field 2) is in parentheses and may hold spaces or ")".
        fields = line[line.rfind(")") + 2:].split()
        if len(fields) < 13 or fields[2] != str(pgid):
            continue
        try:
            ticks += int(fields[11]) + int(fields[12])
        except ValueError:
            continue
        found = True
    return ticks / CLOCK_TICKS if found else None


def group_stopped(stat_lines: str, pid: int) -> bool:
    """Whether a process of ``pid`` or of its group, among ``/proc/*/stat`` lines, is stopped
    (state T: SIGSTOP; t: a debugger)."""
    for line in stat_lines.splitlines():
        fields = line[line.rfind(")") + 2:].split()
        if len(fields) < 3 or fields[0] not in ("T", "t"):
            continue
        if fields[2] == str(pid) or line.split(" ", 1)[0] == str(pid):
            return True
    return False


async def cores_used(launcher: object, host: HostSpec, pgid: int | None,
                     sleep: Callable[[float], Awaitable[None]], seconds: float) -> float | None:
    """How many cores process group ``pgid`` on ``host`` used over ``seconds``; None when it
    cannot be told (no pid known, the launcher runs no commands, the host has no ``/proc``,
    the group is gone). Takes ``seconds`` either way, so that a hang is judged after the same
    time."""

    async def sample() -> float | None:
        if pgid is None or not isinstance(launcher, CommandRunner):
            return None
        try:
            return group_cpu_seconds(await launcher.run_command(host, stat_argv([pgid])), pgid)
        except (OSError, LaunchError):
            return None

    before = await sample()
    await sleep(seconds)
    after = await sample() if before is not None else None
    return None if before is None or after is None else max(0.0, after - before) / seconds
