"""What every launcher's warm start shares: which commands a pool that imported TensorFlow can
serve (forked instead of exec'd), and how long a pool may take to be ready."""

from __future__ import annotations

from collections.abc import Sequence

from trainer.shim import BOOTSTRAP
from trainer.warm import MODES

#: How long a pool may take to import TensorFlow (a loaded 2-core machine: 4-15 s; three
#: runs importing at once: more).
READY_TIMEOUT = 180.0


def servable_mode(argv: Sequence[str], python: str | None) -> tuple[str, tuple[str, ...]] | None:
    """The pool mode and the arguments after the module for ``python -m trainer ...``, and
    for the shim as the controller starts it (``python [-u] -c BOOTSTRAP ...``; ``python -m
    trainer.shim ...`` by hand), with ``python`` as argv[0] when given (the host's
    interpreter); or None: another interpreter, a plain script (``shim: false``), any other
    command. ``-u`` is dropped: every task runs with PYTHONUNBUFFERED already."""
    if len(argv) < 3 or (python is not None and argv[0] != python):
        return None
    words = [argv[0], *argv[2:]] if argv[1] == "-u" else list(argv)
    if len(words) < 3:
        return None
    if words[1] == "-c" and words[2] == BOOTSTRAP:
        return "shim", tuple(words[3:])
    if words[1] != "-m":
        return None
    mode = next((m for m, module in MODES.items() if module == words[2]), None)
    return (mode, tuple(words[3:])) if mode is not None else None
