"""Command lines for a remote login shell, built so that no value can reach it unquoted.

sshd runs every command through the user's login shell (``$SHELL -c COMMAND``). Whatever we
send is therefore parsed by a shell, and every value in it (paths and environment values
from hosts.yaml, the trainer's argv) could inject commands if it were pasted in as text.
So the shell only ever sees a constant script plus single-quoted words
(:func:`shlex.quote`): the script takes the values as positional parameters (``"$1"``),
where no expansion touches them.

The script runs in ``sh`` (POSIX), whatever the login shell: the quoted words are read the
same way by sh, bash, dash, zsh and ksh; a login shell of fish or csh is not supported.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The first line a task prints on stdout: ``tfdist-pid 4242``.
PID_PREFIX = "tfdist-pid "
#: Exit status of the wrapper when ``cd`` to the task's directory failed.
EXIT_NO_WORKDIR = 125
#: Exit statuses of a shell whose command could not be executed.
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Exit status of the wrapper when stdin ended before the environment did.
EXIT_NO_ENVIRONMENT = 124

# $1: directory to cd to ("" = stay in the home directory); $2: a directory to put first on
# PYTHONPATH ("" = none); $3: how many variables to read from stdin; $4 to $6: see _WATCHER;
# then the command.
# The environment comes over the channel, never in this command line: any user of the
# remote host can read a command line in /proc/*/cmdline, and a hosts.yaml's env: holds
# secrets (AWS keys). Each variable is three or more lines on stdin: its name, how many
# lines its value has, the value's lines. `read` is a shell builtin (no process, no argv)
# and reads a pipe byte by byte, so what follows stays the task's own stdin.
# `exec` keeps one process: sshd made the login shell a session and process group leader,
# so the pid we print is the process group the controller signals to stop the task, and it
# stays the trainer's own pid.
# $4 = 1: watch the connection. A task that never reads its stdin does not notice EOF when
# the connection is lost, and would run on (ppid 1). A background watcher, in the task's
# process group, polls the sshd session process that started us; once it is gone it ends
# the group (TERM, then KILL once the task has exited or 5 s later; no "--": dash's kill
# refuses it).
# $5, $6: the lease. A link that is cut (not closed) leaves the sshd session alive for as
# long as TCP retries, so the session alone cannot tell: the controller renews a lease file
# ($5) every second over its own channel (tui.launch.ssh.host_link), and the watcher ends the
# group once the file has not changed for $6 seconds (looks half a second apart, so within
# $6 + 6 s).
# The watcher also ends as soon as the task (the group's leader, $$ through exec) is gone:
# it KILLs what is left of the group, itself included. It lingered 5 s after every task
# before, and a check for leftovers right after the controller's exit found it on every host.
# The watcher ignores TERM itself; started before the environment is read, it carries none
# of it (no secret, no run id). It leaves the task's folder (cd /): a folder is in use while
# a process works in it (tui.launch.ssh.upload_copies).
_WATCHER = (
    'if [ "$4" = 1 ]; then tfdist_p=$PPID; tfdist_g=$$; tfdist_f=$5; tfdist_s=$(($6 * 2)); '
    '( cd /; trap "" TERM; tfdist_b=; tfdist_n=0; '
    'while kill -0 "$tfdist_p" 2>/dev/null && kill -0 "$tfdist_g" 2>/dev/null; do '
    'if [ -n "$tfdist_f" ]; then tfdist_v=; [ -r "$tfdist_f" ] && read -r tfdist_v < "$tfdist_f"; '
    'if [ "$tfdist_v" = "$tfdist_b" ]; then tfdist_n=$((tfdist_n + 1)); '
    '[ "$tfdist_n" -ge "$tfdist_s" ] && break; '
    'else tfdist_b=$tfdist_v; tfdist_n=0; fi; fi; '
    'sleep 0.5; done; '
    'kill -TERM "-$tfdist_g"; tfdist_n=0; '
    'while [ "$tfdist_n" -lt 50 ] && kill -0 "$tfdist_g" 2>/dev/null; do '
    'sleep 0.1; tfdist_n=$((tfdist_n + 1)); done; '
    'kill -KILL "-$tfdist_g" ) </dev/null >/dev/null 2>&1 & '
    'fi; '
)
_TASK_SCRIPT = (
    'if [ -n "$1" ]; then cd -- "$1" || exit ' + str(EXIT_NO_WORKDIR) + '; fi; '
    + _WATCHER +
    'if [ -n "$2" ]; then PYTHONPATH="$2${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH; fi; '
    'n=$3; shift 6; '
    'while [ "$n" -gt 0 ]; do '
    'IFS= read -r tfdist_name && IFS= read -r tfdist_k && IFS= read -r tfdist_v '
    '|| exit ' + str(EXIT_NO_ENVIRONMENT) + '; '
    'while [ "$tfdist_k" -gt 1 ]; do IFS= read -r tfdist_l || exit ' + str(EXIT_NO_ENVIRONMENT) + '; '
    'tfdist_v="$tfdist_v\n$tfdist_l"; tfdist_k=$((tfdist_k - 1)); done; '
    'export "$tfdist_name=$tfdist_v"; n=$((n - 1)); done; '
    'unset tfdist_name tfdist_k tfdist_v tfdist_l; '
    'echo "' + PID_PREFIX + '$$"; '
    'exec "$@"'
)
#: The same without the pid line: for a command that prints it itself (the warm client
#: prints the pid of the task it had forked: tui.launch.ssh.warm).
_QUIET_TASK_SCRIPT = _TASK_SCRIPT.replace('echo "' + PID_PREFIX + '$$"; ', "")


@dataclass(frozen=True)
class RemoteCommand:
    """What to run on a remote host, before quoting."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str = ""
    #: Put first on PYTHONPATH (after any PYTHONPATH in ``env``): the deployed trainer.
    python_path: str = ""
    #: Print :data:`PID_PREFIX` and the pid first (False: the command prints its own).
    prints_pid: bool = True
    #: End the task when its connection is lost, even if it never reads stdin (tasks; not
    #: the controller's own short commands).
    watch_connection: bool = False
    #: With ``watch_connection``: the host's lease file (tui.launch.ssh.host_link) and the seconds
    #: the task runs on once it stops changing; "" for none.
    lease_file: str = ""
    lease: float = 0.0

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("empty command line")
        for name, value in self.env.items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a valid environment variable name")
            if "\0" in value:
                raise ValueError(f"environment variable {name} contains a NUL character")
        for word in (*self.argv, self.cwd, self.python_path, self.lease_file):
            if "\0" in word:
                raise ValueError(f"{word!r} contains a NUL character")

    def _environment(self) -> tuple[dict[str, str], str]:
        env = dict(self.env)
        python_path = self.python_path
        if python_path and "PYTHONPATH" in env:
            # An explicit PYTHONPATH replaces the login environment's; ours still goes first.
            env["PYTHONPATH"] = f"{python_path}:{env['PYTHONPATH']}" if env["PYTHONPATH"] else python_path
            python_path = ""
        return env, python_path

    def shell_line(self) -> str:
        """The line for the login shell. It reads the environment from stdin
        (:meth:`env_input`, to be written first), prints :data:`PID_PREFIX` and its pid on
        stdout (unless the command prints its own: ``prints_pid``), then becomes ``argv``
        (same pid) in ``cwd`` with ``env`` added. No value of ``env`` is in it."""
        env, python_path = self._environment()
        words = [self.cwd, python_path, str(len(env)), "1" if self.watch_connection else "0",
                 self.lease_file, str(max(1, math.ceil(self.lease))), *self.argv]
        script = _TASK_SCRIPT if self.prints_pid else _QUIET_TASK_SCRIPT
        return shlex.join(["exec", "sh", "-c", script, "tfdist", *words])

    def env_input(self) -> bytes:
        """What to write on the command's stdin before anything else: the environment."""
        env, _ = self._environment()
        parts = []
        for name, value in env.items():
            lines = value.split("\n")
            parts.append(f"{name}\n{len(lines)}\n" + "\n".join(lines) + "\n")
        return "".join(parts).encode("utf-8", "surrogateescape")


def signal_groups_line(pgids: Sequence[int], signal_name: str) -> str:
    """``kill -s TERM -- -PGID...``: signal tasks' whole process groups."""
    if not pgids or any(pgid <= 1 for pgid in pgids):
        raise ValueError(f"refusing to signal process groups {list(pgids)}")
    if not signal_name.isalnum():
        raise ValueError(f"not a signal name: {signal_name!r}")
    return f"kill -s {signal_name} -- " + " ".join(f"-{int(pgid)}" for pgid in pgids)


def python_command(python: str, source: str, args: Sequence[str] = (),
                   env: Mapping[str, str] | None = None, cwd: str = "") -> RemoteCommand:
    """Run a Python snippet remotely: ``python -c SOURCE ARGS...``, quoted like a task (its
    environment, too, goes on stdin: :meth:`RemoteCommand.env_input`)."""
    return RemoteCommand(argv=(python, "-c", source, *args), env=env or {}, cwd=cwd)


def parse_pid_line(line: str) -> int | None:
    """The pid from the wrapper's first line, or None if ``line`` is not that line."""
    if not line.startswith(PID_PREFIX):
        return None
    text = line[len(PID_PREFIX):].strip()
    return int(text) if text.isdigit() and int(text) > 1 else None
