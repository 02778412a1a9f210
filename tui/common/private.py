"""Files only their owner may read, and files written without following a planted link.

A run directory holds what a task was given (its environment, a hosts.yaml's secrets among
it) and what it printed: other users of the machine must not read it, whatever their
umask. Modes are set where each file or folder is made, not through the process's umask,
which the tasks would inherit (their checkpoints are theirs to share).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

#: Folders and files of a run: their owner's alone.
DIR_MODE = 0o700
FILE_MODE = 0o600


def private_opener(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open`: a new file is created 0600, and a symbolic link at
    ``path`` is refused (ELOOP) rather than followed."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)


def make_private_dir(path: Path, *, parents: bool = False, exist_ok: bool = False) -> None:
    """``mkdir`` 0700 (parents made on the way get the usual mode). Raises OSError."""
    path.mkdir(mode=DIR_MODE, parents=parents, exist_ok=exist_ok)
    os.chmod(path, DIR_MODE, follow_symlinks=False)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in place, 0600, never through a link. Raises OSError."""
    with open(path, "w", encoding="utf-8", opener=private_opener) as handle:
        handle.write(text)
    os.chmod(path, FILE_MODE, follow_symlinks=False)


def replace_file(path: Path, text: str, *, mode: int = FILE_MODE) -> None:
    """Write ``text`` as ``path`` atomically: a new temporary file beside it (its name
    unpredictable, created exclusively), synced, renamed over ``path``. A symbolic link
    planted at ``path`` is replaced, never written through. Raises OSError."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class NotPrivate(OSError):
    """A folder this controller would write into is a symbolic link, or someone else's."""


def own_private_dir(path: Path) -> None:
    """Make ``path`` (0700) or check that the one there is a real folder of this user:
    a folder whose name can be guessed (a sweep's) may have been planted, with links in it
    to files its planter wants overwritten. Raises :class:`NotPrivate` (or OSError)."""
    try:
        make_private_dir(path, parents=False, exist_ok=False)
        return
    except FileExistsError:
        pass
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        make_private_dir(path)
        return
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise NotPrivate(f"{path} is not a folder (a symbolic link?): refusing to write into it")
    if info.st_uid != os.geteuid():
        raise NotPrivate(f"{path} belongs to another user (uid {info.st_uid}): refusing to write into it")
