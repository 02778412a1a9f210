"""How long each kind of remote step may take, in one place.

A limit guards against a command that hangs, not against a dead host: a host that stops
answering is noticed by its connection and its lease (:mod:`tui.launch.ssh.host_link`). So a
limit is set for what the step does on a loaded host, and grows with how much it does at once
(the process groups one signal names, the tasks one host starts together, the ports one
reservation holds): under a load average of ~47 on 2 cores, a remote ``kill`` of a few
process groups and a task's start ran past a fixed 30 s, and hosts that were only slow failed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepLimit:
    """``base`` seconds for a step that handles one thing, ``each`` more per further thing."""

    base: float
    each: float = 0.0

    def of(self, count: int = 1) -> float:
        """The limit for a step that handles ``count`` things at once."""
        return self.base + self.each * max(0, count - 1)


#: A plain shell command (a signal, a read of /proc): sshd opens a session and starts a
#: shell, which alone took tens of seconds on a host loaded ~47 on 2 cores.
SHELL = StepLimit(60.0, 1.0)
#: A command that starts the host's Python (a snippet: a port check or reservation, the
#: leftover search, a copy's clean-up; a keeper process; a task's wrapper printing its pid):
#: an interpreter's start on a loaded host, with every other host prepared or started at once.
INTERPRETER = StepLimit(120.0, 2.0)
#: Reading what a command that failed printed on stderr, once it is known to have failed.
FAILURE_OUTPUT = StepLimit(30.0)
