"""Which Python an interpreter path is, as that interpreter itself reports it.

A venv's ``bin/python`` is a symlink to the base interpreter, yet Python finds the venv (and
its site-packages) by the path it was started from: resolving the link (``os.path.realpath``)
turns a venv's interpreter into the base one, which sees none of the venv's packages. So a
path is kept as given, and two paths are the same interpreter when the interpreters started
from them report the same ``sys.prefix`` (the environment, whose site-packages it sees) and
the same ``sys.version`` (the build); ``sys.executable`` then only tells which name was used
(``python`` or ``python3`` of one venv)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from dataclasses import dataclass

#: How long an interpreter may take to say who it is (a loaded machine; no imports but sys).
IDENTIFY_TIMEOUT = 20.0
#: Isolated mode: nothing from the current folder, PYTHON* variables or user site-packages
#: answers in its place (a user's ``sys.py`` cannot, but a ``-I`` costs nothing).
_ASK = ("-I", "-c", "import sys; print(sys.prefix); print(sys.executable); print(repr(sys.version))")


@dataclass(frozen=True)
class Interpreter:
    """An interpreter as it reports itself: its prefix (a venv's folder, a conda prefix, the
    base installation), its build, and the executable's name it was started by (for a venv,
    its own path). Equal when the first two are: see :attr:`identity`."""

    prefix: str
    version: str
    executable: str

    @property
    def identity(self) -> tuple[str, str]:
        """What makes two paths one interpreter: one environment, one build."""
        return self.prefix, self.version


def this_interpreter() -> Interpreter:
    """The controller's own interpreter."""
    return Interpreter(sys.prefix, repr(sys.version), sys.executable)


def locate(python: str, path: str | None) -> str | None:
    """``python`` as a path to run: a bare name looked up on ``path`` (the task's PATH), a
    path made absolute; symlinks are never resolved. None if there is no such program."""
    if os.sep not in python:
        return shutil.which(python, path=path)
    return os.path.abspath(python) if os.access(python, os.X_OK) else None


async def identify(python: str) -> Interpreter | None:
    """What the interpreter at ``python`` (a path, as :func:`locate` gives) reports, or None
    when it is not a Python that answers (another program, a broken venv, too slow)."""
    if python == sys.executable:
        return this_interpreter()
    try:
        process = await asyncio.create_subprocess_exec(
            python, *_ASK, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(process.communicate(), IDENTIFY_TIMEOUT)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        return None
    lines = out.decode("utf-8", "replace").splitlines()
    if process.returncode != 0 or len(lines) != 3 or not all(lines):
        return None
    return Interpreter(prefix=lines[0], version=lines[2], executable=lines[1])
