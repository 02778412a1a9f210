"""A folder's files and the digest that names them: what is uploaded to a remote host into a
content-addressed directory ``<name>-<digest>`` (see :mod:`tui.launch.ssh.deploy`). Pure: no
connection here, so plans can name the directory a task will run in. A package holds each
file's path, mode and sha256, never its content (a 200 MB file was held whole)."""

from __future__ import annotations

import functools
import hashlib
import io
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from trainer import protocol

log = logging.getLogger(__name__)

#: Never uploaded: caches, version control, and compiled files.
SKIPPED_PARTS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache",
                           ".ruff_cache"})
SKIPPED_SUFFIXES = frozenset({".pyc", ".pyo"})


#: How much of a file is read at once, to hash it or to upload it: the controller never holds
#: more of a file than this, however large the file.
CHUNK = 1024 * 1024


@dataclass(frozen=True)
class PackageFile:
    """One file to upload: a folder's file is read from ``source`` (in chunks, when it is
    hashed and when it is uploaded); a small generated one is ``data``."""

    path: str  # relative, with "/" separators, e.g. "trainer/loop.py"
    data: bytes = b""
    #: Permission bits, kept on the host (a 0600 key stays 0600, a script stays executable).
    mode: int = 0o644
    source: Path | None = None
    #: The content's sha256 (hex); computed from ``data`` when not given.
    sha256: str = ""

    def __post_init__(self) -> None:
        if not self.sha256:
            if self.source is not None:
                raise ValueError(f"{self.path}: a file read from {self.source} needs its sha256")
            object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())

    @classmethod
    def from_file(cls, path: str, source: Path, mode: int) -> PackageFile:
        """``source`` uploaded as ``path``, hashed now a chunk at a time."""
        digest = hashlib.sha256()
        with source.open("rb") as file:
            while chunk := file.read(CHUNK):
                digest.update(chunk)
        return cls(path, mode=mode, source=source, sha256=digest.hexdigest())

    def open(self) -> BinaryIO:
        """The content, to be read a chunk at a time."""
        return self.source.open("rb") if self.source is not None else io.BytesIO(self.data)


@dataclass(frozen=True)
class FolderPackage:
    """Files to upload (paths relative to the uploaded directory) and their digest."""

    name: str
    files: tuple[PackageFile, ...]
    digest: str  # 12 hex characters
    #: Permission bits of the folders that hold the files ("" is the copy itself): a 0700
    #: folder stays 0700, so a 0644 file in it stays out of other users' reach there too.
    folders: tuple[tuple[str, int], ...] = ()

    @property
    def dirname(self) -> str:
        return f"{self.name}-{self.digest}"

    @property
    def size(self) -> int:
        """The files' bytes together, as they are on this machine now (a file gone counts 0)."""
        total = 0
        for file in self.files:
            try:
                total += file.source.stat().st_size if file.source is not None else len(file.data)
            except OSError:
                continue
        return total

    @classmethod
    def of(cls, name: str, files: Iterable[PackageFile],
           folders: Iterable[tuple[str, int]] = ()) -> FolderPackage:
        """A package of ``files``; the digest covers every path, content and mode."""
        files = tuple(sorted(files, key=lambda f: f.path))
        folders = tuple(sorted(folders))
        digest = hashlib.sha256()
        parts = [(f.path.encode(), bytes.fromhex(f.sha256), f"{f.mode:o}".encode()) for f in files]
        parts += [(b"folder", path.encode(), f"{mode:o}".encode()) for path, mode in folders]
        for part in (part for group in parts for part in group):
            # Length-prefixed, so no two different packages can hash alike by shifting bytes.
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return cls(name, files, digest.hexdigest()[:12], folders)

    @classmethod
    def from_directory(cls, folder: Path, *, name: str | None = None, under: str = "",
                       exclude: Iterable[Path] = ()) -> FolderPackage:
        """The files below ``folder`` (``under`` prefixes their paths), without caches and
        without the folders in ``exclude`` (such as a run directory inside it). A symbolic
        link is followed only to a file inside ``folder``: one to ``/etc/passwd`` or to a
        secret elsewhere is left out (and logged), never uploaded. The folders that hold a
        file keep their permission bits, like the files."""
        root = folder.resolve()
        excluded = tuple(p.resolve() for p in exclude)
        found = []
        holders: set[Path] = set()  # the folders (relative, "." the top one) that hold a file
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if not path.is_file() or SKIPPED_PARTS & set(relative.parts) or path.suffix in SKIPPED_SUFFIXES:
                continue
            target = path.resolve()
            if not target.is_relative_to(root):
                log.warning("upload: %s links outside %s (to %s): left out", path, root, target)
                continue
            if any(target.is_relative_to(e) for e in excluded):
                continue
            found.append(PackageFile.from_file(f"{under}{relative.as_posix()}", target,
                                               target.stat().st_mode & 0o777))
            holders.update(relative.parents)
        folders = [(f"{under}{p.as_posix()}" if p.parts else under.rstrip("/"),
                    (folder / p).stat().st_mode & 0o777) for p in holders]
        return cls.of(name or folder.resolve().name or "upload", found, folders)


def upload_package(folder: Path, exclude: Iterable[Path] = ()) -> FolderPackage:
    """A user's ``upload:`` folder, hashed again only when a file in it changed (so a relaunch
    after an edit uploads the new files, and a plan can name the directory cheaply). Only
    names, modes and hashes are kept: the files are read again, a chunk at a time, when
    they are uploaded."""
    folder = folder.resolve()
    excluded = tuple(p.resolve() for p in exclude)
    return _cached_upload(folder, excluded, _signature(folder, excluded))


@functools.lru_cache(maxsize=8)
def _cached_upload(folder: Path, exclude: tuple[Path, ...], signature: int) -> FolderPackage:
    return FolderPackage.from_directory(folder, exclude=exclude)


def _signature(folder: Path, exclude: tuple[Path, ...]) -> int:
    """Changes when any file below ``folder`` is added, removed, resized or touched."""
    entries = []
    for path in folder.rglob("*"):
        if any(path.is_relative_to(e) for e in exclude) or SKIPPED_PARTS & set(path.parts):
            continue
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((str(path), stat.st_size, stat.st_mtime_ns, stat.st_mode))
    return hash(tuple(sorted(entries)))


def trainer_root() -> Path:
    """The directory that holds the ``trainer`` package the controller itself imports; put
    on local tasks' PYTHONPATH so ``python -m trainer`` finds the same code."""
    return Path(protocol.__file__).resolve().parent.parent
