"""Writing a package's files into a directory on a host over SFTP, streamed: each file is
read, hashed and sent a chunk at a time (:data:`tui.launch.package.CHUNK`), so the controller
holds a bounded part of a file however large it is (it held a 200 MB file whole: 263 MB RSS).

A file whose content is no longer the one its package was named after (edited while it was
being uploaded) fails the upload, so a content-addressed directory never holds other bytes
than its name says."""

from __future__ import annotations

import asyncio
import hashlib
import posixpath
from typing import BinaryIO, Protocol

import asyncssh

from tui.launch.package import CHUNK, FolderPackage, PackageFile

MARKER = ".tfdist-complete"


class _Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...


class ChangedDuringUpload(OSError):
    """A file's content differs from the one its package was hashed from."""


async def write_package(sftp: asyncssh.SFTPClient, directory: str, package: FolderPackage) -> None:
    """Create ``directory`` and upload every file of ``package`` into it, with its permission
    bits (and its folders' bits); the :data:`MARKER` file is written after the files, so its
    presence means every file is there.
    Raises :class:`ChangedDuringUpload`, or what SFTP and the local files raise."""
    await sftp.mkdir(directory)
    made = {directory}
    for file in package.files:
        path = posixpath.join(directory, file.path)
        parent = posixpath.dirname(path)
        if parent not in made:
            await sftp.makedirs(parent, exist_ok=True)
            made.add(parent)
        await _write_file(sftp, path, file)
        await sftp.chmod(path, file.mode)  # its own permissions, not the remote umask's
    listing = "".join(f"{f.path}\n" for f in package.files)
    async with sftp.open(posixpath.join(directory, MARKER), "w") as marker:
        await marker.write(f"{package.digest}\n{listing}")
    # The folders' own permissions last, deepest first (a read-only one would refuse the
    # files): a 0700 folder is not opened to other users by the host's umask. The owner keeps
    # full access, so the copy can always be removed again.
    for folder, mode in sorted(package.folders, key=lambda f: f[0].count("/") + bool(f[0]), reverse=True):
        await sftp.chmod(posixpath.join(directory, folder) if folder else directory, mode | 0o700)


async def _write_file(sftp: asyncssh.SFTPClient, path: str, file: PackageFile) -> None:
    digest = hashlib.sha256()
    with file.open() as local:
        async with sftp.open(path, "wb") as remote:
            offset = 0
            # Read and hashed in a thread: a slow disk must not stall the tasks' output.
            while chunk := await asyncio.to_thread(_read_hashed, local, digest):
                # One chunk at a time; asyncssh sends it as parallel SFTP writes.
                await remote.write(chunk, offset)
                offset += len(chunk)
    if digest.hexdigest() != file.sha256:
        where = file.source if file.source is not None else file.path
        raise ChangedDuringUpload(f"{where} changed while it was being uploaded; launch again")


def _read_hashed(local: BinaryIO, digest: _Hash) -> bytes:
    chunk = local.read(CHUNK)
    digest.update(chunk)
    return chunk
