"""One-line hints for known failures of distributed TensorFlow tasks.

Task output is full of noise; a few lines, though, say exactly what went wrong and what to
do about it. :func:`hint_for` recognises them in one line of output (plain text or a
protocol event line: an ``error`` event's message is matched like any text), and
:func:`hint_for_exit` recognises an exit code that by itself suggests a cause. All patterns
live in :data:`HINTS`, one table, first match wins. Pure functions: no Textual, no
TensorFlow, no I/O.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFailure:
    """A pattern in task output and the hint it deserves. ``clues``: case-folded words of
    which every match of ``pattern`` contains at least one; a line without any is passed
    over before the pattern is tried (every line of every task goes through here, and most
    show nothing: the clues make that 15 times cheaper than the patterns)."""

    name: str
    pattern: re.Pattern[str]
    hint: str
    clues: tuple[str, ...]
    #: Lines that match ``pattern`` and yet show no failure.
    unless: re.Pattern[str] | None = None

    def found_in(self, text: str, folded: str) -> bool:
        """Whether ``text`` (``folded``: its :meth:`str.casefold`) shows this failure."""
        return any(clue in folded for clue in self.clues) and self.pattern.search(text) is not None \
            and (self.unless is None or self.unless.search(text) is None)


PORT_IN_USE = ("port already taken: another process holds this task's port (another controller on the "
               "same fixed ports?); stop it (ss -ltnp shows which) or use localhost:auto in hosts.yaml")
UNAVAILABLE = ("a ps or peer task is gone or unreachable: check that it is still running and that its "
               "host:port is reachable from here (firewall, hostname)")
CREATE_SESSION = ("a task the session needs is not up: check that every ps/worker started, and the "
                  "cluster's hosts and device filters")
OUT_OF_MEMORY = "out of memory: use a smaller model, batch size or partition count, or a bigger host"
DATASET_MISSING = ("dataset missing: set data_path to an .npz with x_train, y_train, x_test, y_test on "
                   "every host, or use dataset: digits")
SIGKILL_HINT = "killed by SIGKILL: out of memory?"
MODULE_MISSING = ("a module is missing: the task's Python has no package of that name; install it into the "
                  "host's python: interpreter (its own pip), or set python: to the environment that has it")
PER_WORKER_DATASET = ("a dataset used without coordinator.create_per_worker_dataset: Keras 3's "
                      "model.fit cannot run under ParameterServerStrategy; pip install tf_keras and run "
                      "the program with TF_USE_LEGACY_KERAS=1 (command: TF_USE_LEGACY_KERAS=1 python ...), "
                      "or make a custom loop's dataset with the coordinator's create_per_worker_dataset")
NO_COORDINATOR = ("nothing coordinates this worker: a TF2 ParameterServerStrategy program needs a chief: "
                  "job in hosts.yaml's cluster (the coordinator that runs model.fit or the training loop)")

#: A warning of TensorFlow's C++ log (``W0000 00:00:1795452453.528990   16598 file.cc:2166]``):
#: an UNAVAILABLE there is a retry or a peer already gone at shutdown (the master's
#: ``DeleteWorkerSession`` after a successful run); a real failure follows as an error or a
#: Python ``UnavailableError``.
TF_WARNING = re.compile(r"^W\d{4} [\d:.]+\s+\d+ \S+:\d+\]")

#: How much of a line :func:`hint_for` looks at.
SCAN_CHARS = 16_384

#: Every known failure, tried in order; the first match gives the hint.
HINTS: tuple[KnownFailure, ...] = (
    # TensorFlow's own words when its server cannot bind; the trainer's port claim
    # (trainer.portclaim) says "address already in use" before TensorFlow is even imported.
    KnownFailure("port in use", re.compile(r"address already in use|EADDRINUSE|Could not start gRPC server",
                                           re.IGNORECASE), PORT_IN_USE,
                 ("address already in use", "eaddrinuse", "could not start grpc server")),
    # The shim's words (trainer.shim.hooks.NO_COORDINATOR) for a worker that only serves.
    KnownFailure("no coordinator", re.compile(r"the cluster has no chief to coordinate it"), NO_COORDINATOR,
                 ("no chief to coordinate",)),
    # Python's own words, the last line of the traceback of an import that found nothing: a
    # program run with a venv's packages on one host and not on another, a typo'd module.
    KnownFailure("module missing", re.compile(r"\bModuleNotFoundError: No module named\b"), MODULE_MISSING,
                 ("modulenotfounderror",)),
    # TensorFlow's words (input_lib) when Keras 3's fit, or a custom loop, iterates a dataset
    # under ParameterServerStrategy itself (TF 2.21, Keras 3.x: keras#18624).
    KnownFailure("per-worker dataset",
                 re.compile(r"pass this dataset to ClusterCoordinator\.create_per_worker_dataset"),
                 PER_WORKER_DATASET, ("create_per_worker_dataset",)),
    KnownFailure("create session waiting", re.compile(r"CreateSession still waiting"), CREATE_SESSION,
                 ("createsession",)),
    KnownFailure("unavailable", re.compile(r"\bUnavailableError\b|\bUNAVAILABLE\b"), UNAVAILABLE,
                 ("unavailable",), unless=TF_WARNING),
    KnownFailure("dataset missing",
                 re.compile(r"\bdataset\b.{0,200}?\bnot found\b", re.IGNORECASE), DATASET_MISSING,
                 ("not found",)),
    KnownFailure("out of memory",
                 re.compile(r"^\s*Killed\s*$"                     # the shell's note after SIGKILL
                            r"|Out of memory: Kill(?:ed)? process"  # the kernel's OOM killer
                            r"|\boom-kill\b|\bOOM when allocating\b|\bMemoryError\b"
                            r"|\bstd::bad_alloc\b|Cannot allocate memory", re.IGNORECASE),
                 OUT_OF_MEMORY,
                 ("killed", "out of memory", "oom", "memoryerror", "bad_alloc", "cannot allocate memory")),
)

#: Exit codes of a process killed by SIGKILL: -9 from a local process, 137 (128 + 9) from a
#: shell or ssh in between. Nothing but the OOM killer sends it unless someone chose to.
_SIGKILL_CODES = frozenset({-signal.SIGKILL, 128 + signal.SIGKILL})


#: Every clue of every known failure in one pattern, matched against the case-folded line: a
#: line without any (nearly every line) costs one search in C, not a scan per failure (the
#: log pipe's budget). Not re.IGNORECASE: that alternation is 20 times slower.
_ANY_CLUE = re.compile("|".join(re.escape(clue) for known in HINTS for clue in known.clues))


def hint_for(line: str) -> str | None:
    """The hint for one line of task output, or None when it shows no known failure. Only
    the first :data:`SCAN_CHARS` characters are looked at (a task may print megabyte lines)."""
    head = line[:SCAN_CHARS]
    folded = head.casefold()
    if _ANY_CLUE.search(folded) is None:
        return None
    for known in HINTS:
        if known.found_in(head, folded):
            return known.hint
    return None


def hints_in(lines: Sequence[str], joined: str) -> dict[int, str]:
    """The hint of each line of a batch that shows a known failure, by the line's index, in
    order (``joined``: the lines joined by newlines; a batch without any clue, nearly every
    batch, costs one search of it)."""
    if _ANY_CLUE.search(joined.casefold()) is None:
        return {}
    return {index: hint for index, line in enumerate(lines) if (hint := hint_for(line)) is not None}


def hint_for_exit(code: int) -> str | None:
    """The hint for how a task that failed by itself exited (not after the controller
    stopped it), or None."""
    if code in _SIGKILL_CODES:
        return SIGKILL_HINT
    return None
