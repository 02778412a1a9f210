"""An ``upload:`` folder's copies in a host's workdir (``<name>-<12 hex digits>``): mark the
current one used, and remove the earlier ones nothing uses any more.

``python -c SOURCE WORKDIR NAME CURRENT UNUSED_FOR`` sets the modification time of
``WORKDIR/CURRENT`` to now (the copy's "last used" time) and says whether it is complete (its
marker is there). Every other copy of NAME is removed when it was last used more than
UNUSED_FOR seconds ago and no live process has its working directory inside it (every task
runs in its copy, warm or cold). Without ``/proc`` (not Linux) nothing is removed: which
copies are in use cannot be told.

``python -c SOURCE look WORKDIR COPY...`` changes nothing (``tfdist-tui check``): for each
named copy, whether it is complete and the sha256 of every file its marker lists (None where
the file is missing), and, for an upload, the nearest existing folder at or above WORKDIR,
whether a copy could be made there and its free space.

A copy is first renamed to ``<copy>.partial-gone-<pid>`` (a half-removed copy must never look
complete), then checked again: a controller that marked it used meanwhile gets it back."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import time

RESULT_PREFIX = "tfdist-result "
MARKER = ".tfdist-complete"


def working_dirs() -> list[str] | None:
    """The working directory of every process we may look at, or None without /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                found.append(os.path.realpath(os.readlink(f"/proc/{name}/cwd")))
            except OSError:
                continue  # gone, or another user's
    return found


def in_use(path: str, cwds: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(cwd == real or cwd.startswith(real + os.sep) for cwd in cwds)


def last_used(path: str) -> float | None:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None


def is_copy(path: str) -> bool:
    """A real folder (not a symlink, not a file): only what deploy made is ever touched; a
    link or file planted under a copy's name is left alone, under its own name."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def remove(path: str, unused_for: float) -> bool:
    """Remove the copy ``path`` unless someone marked it used while it was being removed."""
    doomed = f"{path}.partial-gone-{os.getpid()}"
    try:
        os.rename(path, doomed)
    except OSError:
        return False
    used = last_used(doomed)
    if not is_copy(doomed) or (used is not None and time.time() - used <= unused_for):
        try:
            # A controller marked it used meanwhile, or it was swapped for something that
            # is not a copy: it stays, under its name.
            os.rename(doomed, path)
            return False
        except OSError:
            if not is_copy(doomed):
                return False
            # that controller uploaded it again meanwhile: this one is not needed
    shutil.rmtree(doomed, ignore_errors=True)
    return not os.path.lexists(doomed)  # "removed" only when it is gone


def tidy(workdir: str, name: str, current: str, unused_for: float) -> dict[str, object]:
    path = os.path.join(workdir, current)
    try:
        os.utime(path)
    except OSError:
        pass  # not uploaded yet (or removed meanwhile): the controller uploads it
    complete = os.path.isfile(os.path.join(path, MARKER))
    removed: list[str] = []
    busy: list[str] = []
    cwds = working_dirs()
    try:
        entries = sorted(os.listdir(workdir)) if cwds is not None else []
    except OSError:
        entries = []
    pattern = re.compile(re.escape(name) + r"-[0-9a-f]{12}")
    now = time.time()
    for entry in entries:
        copy = os.path.join(workdir, entry)
        used = last_used(copy)
        if entry == current or not pattern.fullmatch(entry) or not is_copy(copy) or used is None \
                or now - used <= unused_for:
            continue
        if in_use(copy, cwds or []):
            busy.append(entry)
        elif remove(copy, unused_for):
            removed.append(entry)
    return {"current": complete, "removed": removed, "in_use": busy, "proc": cwds is not None}


def look(workdir: str, names: list[str]) -> dict[str, object]:
    """What a run would find of the copies ``names`` in ``workdir``; touches nothing."""
    import hashlib

    workdir = os.path.abspath(os.path.expanduser(workdir))
    copies: dict[str, object] = {}
    for name in names:
        marker = os.path.join(workdir, name, MARKER)
        try:
            with open(marker, encoding="utf-8") as file:
                listed = file.read().splitlines()[1:]
        except (OSError, ValueError):
            copies[name] = None
            continue
        files: dict[str, object] = {}
        for path in listed:
            digest = hashlib.sha256()
            try:
                with open(os.path.join(workdir, name, path), "rb") as handle:
                    chunk = handle.read(1 << 20)
                    while chunk:
                        digest.update(chunk)
                        chunk = handle.read(1 << 20)
                files[path] = digest.hexdigest()
            except OSError:
                files[path] = None
        copies[name] = files
    folder = workdir
    while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    usable = os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)
    free = shutil.disk_usage(folder).free if os.path.isdir(folder) else None
    return {"workdir": workdir, "copies": copies, "folder": folder, "writable": usable, "free": free}


def main(argv: list[str]) -> None:
    if argv[:1] == ["look"] and len(argv) >= 2:
        sys.stdout.write(RESULT_PREFIX + json.dumps(look(argv[1], argv[2:])) + "\n")
        sys.stdout.flush()
        return
    if len(argv) != 4:
        sys.exit("usage: WORKDIR NAME CURRENT UNUSED_FOR | look WORKDIR COPY...")
    answer = tidy(argv[0], argv[1], argv[2], float(argv[3]))
    sys.stdout.write(RESULT_PREFIX + json.dumps(answer) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
