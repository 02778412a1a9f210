"""Getting a remote host ready to run tasks: probe its Python and TensorFlow, and upload the
``trainer`` package, so a remote host needs nothing but Python and TensorFlow (and a user's
``upload:`` folder the same way, see :mod:`tui.launch.package`).

The package goes into a content-addressed directory,
``<workdir>/trainer-<first 12 hex of its sha256>/trainer/...``. It is uploaded into a
staging directory first, a marker file is written last, and the staging directory is then
renamed into place: a directory with that name is always complete, so a later run (or
another controller) that finds its marker skips the upload. The files are streamed
(:mod:`tui.launch.ssh.upload`); a user's folder's earlier copies are removed once nothing uses
them (:mod:`tui.launch.ssh.upload_copies`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import posixpath
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from tui.config.cluster import HostSpec
from tui.launch import snippets
from tui.launch.errors import HostError, HostFailure
from tui.launch.package import FolderPackage, PackageFile, trainer_root
from tui.launch.ssh.connect import where
from tui.launch.ssh.remote_command import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, python_command
from tui.launch.ssh.upload import MARKER, write_package

PACKAGE = "trainer"
DEFAULT_PROBE_TIMEOUT = 120.0
#: Lines of a failed command's stderr quoted in its error.
STDERR_LINES = 3


class TrainerPackage(FolderPackage):
    """The files of the ``trainer`` package (paths start with ``trainer/``) and their digest."""

    @classmethod
    def from_directory(cls, folder: Path, *, name: str | None = None, under: str = "",
                       exclude: Iterable[Path] = ()) -> TrainerPackage:
        """Read ``folder/trainer`` (without caches). Its files (a few hundred KB) are held in
        memory: what a controller uploads stays what it read, even if the installed files
        are replaced while it runs."""
        package = folder / PACKAGE
        if not (package / "__init__.py").is_file():
            raise FileNotFoundError(f"no {PACKAGE} package in {folder}")
        found = FolderPackage.from_directory(package, name=PACKAGE, under=f"{PACKAGE}/")
        held = FolderPackage.of(PACKAGE, (PackageFile(f.path, f.source.read_bytes() if f.source else f.data,
                                                      f.mode) for f in found.files), found.folders)
        return cls(PACKAGE, held.files, held.digest, held.folders)  # hashed from the bytes held


@functools.cache
def local_package() -> TrainerPackage:
    """The trainer package this controller itself imports (read once)."""
    return TrainerPackage.from_directory(trainer_root())


@dataclass(frozen=True)
class Deployment:
    """Where the trainer is on a host. ``path`` goes first on the tasks' PYTHONPATH."""

    path: str
    uploaded: bool  # False: it was there already


@dataclass(frozen=True)
class HostProbe:
    """What the probe found on a host."""

    python: str          # as configured (python: in hosts.yaml)
    executable: str      # sys.executable there
    python_version: str
    tf_version: str
    workdir: str         # absolute
    home: str


async def probe(conn: asyncssh.SSHClientConnection, spec: HostSpec,
                timeout: float = DEFAULT_PROBE_TIMEOUT, *, import_tf: bool = True) -> HostProbe:
    """Run the probe snippet on the host: the interpreter, the folders and TensorFlow's
    version, read from its package metadata (imported only where it has none); without
    ``import_tf`` TensorFlow is not looked for (``tf_version`` is then ""). Raises
    :class:`HostError`: PYTHON_MISSING, TENSORFLOW_MISSING, or COMMAND_FAILED for anything else."""
    def fail(failure: HostFailure, detail: str) -> HostError:
        return HostError(spec.name, where(spec), failure, detail)

    args = [spec.workdir] if import_tf else [spec.workdir, "no-tf"]
    command = python_command(spec.interpreter, snippets.source("probe"), args, env=spec.env)
    try:
        # The environment on stdin, never in the command line (tui.launch.ssh.remote_command).
        env = command.env_input().decode("utf-8", "surrogateescape")
        result = await conn.run(command.shell_line(), input=env, timeout=timeout, encoding="utf-8",
                                errors="replace")
    except asyncssh.TimeoutError:
        raise fail(HostFailure.COMMAND_FAILED, f"{spec.interpreter} did not answer within {timeout:g} s "
                                               f"(importing tensorflow hangs?)") from None
    except (asyncssh.Error, OSError) as exc:
        raise fail(HostFailure.CONNECTION_LOST, f"while probing python: {exc}") from None
    stderr = str(result.stderr or "")
    if result.exit_status in (EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE):
        how = "was not found" if result.exit_status == EXIT_NOT_FOUND else "is not executable"
        raise fail(HostFailure.PYTHON_MISSING,
                   f"{spec.interpreter} {how} on the host; set python: in hosts.yaml to an interpreter "
                   f"that has TensorFlow")
    answer = snippets.parse_result(str(result.stdout or ""))
    if not isinstance(answer, Mapping):
        raise fail(HostFailure.PYTHON_MISSING if "SyntaxError" in stderr else HostFailure.COMMAND_FAILED,
                   f"{spec.interpreter} did not run the probe ({describe_status(result)}): "
                   f"{last_lines(stderr)}")
    if import_tf and (answer.get("tf_error") or not answer.get("tf_version")):
        raise fail(HostFailure.TENSORFLOW_MISSING,
                   f"{spec.interpreter} ({answer.get('executable') or answer.get('python')}, Python "
                   f"{answer.get('python_version')}) cannot import tensorflow: {answer.get('tf_error')}")
    return HostProbe(python=spec.interpreter, executable=str(answer.get("python", "")),
                     python_version=str(answer.get("python_version", "")),
                     tf_version=str(answer["tf_version"] or ""), workdir=str(answer["workdir"]),
                     home=str(answer.get("home", "")))


async def deploy(conn: asyncssh.SSHClientConnection, spec: HostSpec, workdir: str,
                 package: FolderPackage | None = None) -> Deployment:
    """Make sure ``<workdir>/<name>-<digest>`` holds ``package`` (default: this controller's
    trainer; a user's ``upload:`` folder otherwise). ``workdir`` must be absolute. Raises
    :class:`HostError` (DEPLOY_FAILED)."""
    package = package or local_package()
    final = posixpath.join(workdir, package.dirname)
    try:
        async with conn.start_sftp_client() as sftp:
            if await sftp.exists(posixpath.join(final, MARKER)):
                return Deployment(final, uploaded=False)
            await sftp.makedirs(workdir, exist_ok=True)
            await _remove_stale_partials(sftp, workdir, package.name)
            staging = f"{final}.partial-{secrets.token_hex(4)}"
            try:
                await write_package(sftp, staging, package)
            except BaseException:
                # Not left behind (a 155 MB .partial-* after a failed upload); if the
                # connection is gone, the next deploy of this package removes it.
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(sftp.rmtree(staging, ignore_errors=True), 10.0)
                raise
            try:
                await sftp.rename(staging, final)
            except asyncssh.SFTPError:
                # Someone else (another controller) put it in place meanwhile: keep theirs.
                if not await sftp.exists(posixpath.join(final, MARKER)):
                    raise
                await sftp.rmtree(staging, ignore_errors=True)
                return Deployment(final, uploaded=False)
    except asyncssh.ChannelOpenError as exc:
        if conn.is_closed():  # the connection dropped during the upload: not a missing SFTP
            raise HostError(spec.name, where(spec), HostFailure.CONNECTION_LOST,
                            f"the connection was lost while uploading {package.name} to {final}: "
                            f"{exc.reason}") from None
        raise HostError(spec.name, where(spec), HostFailure.DEPLOY_FAILED, no_sftp(exc.reason)) from None
    except (asyncssh.Error, OSError) as exc:
        reason = exc.reason if isinstance(exc, asyncssh.Error) else (exc.strerror or str(exc))
        raise HostError(spec.name, where(spec), HostFailure.DEPLOY_FAILED,
                        f"cannot upload {package.name} to {final}: {reason}") from None
    return Deployment(final, uploaded=True)


#: A ``.partial-*`` upload older than this is an abandoned one (a dropped connection).
STALE_PARTIAL = 3600.0


async def _remove_stale_partials(sftp: asyncssh.SFTPClient, workdir: str, name: str) -> None:
    """Remove the abandoned partial uploads of package ``name`` in ``workdir``."""
    prefix = f"{name}-"
    try:
        entries = await sftp.readdir(workdir)
    except asyncssh.SFTPError:
        return
    now = time.time()
    for entry in entries:
        filename = str(entry.filename)
        mtime = entry.attrs.mtime or now
        if filename.startswith(prefix) and ".partial-" in filename and now - mtime > STALE_PARTIAL:
            with contextlib.suppress(asyncssh.SFTPError):
                await sftp.rmtree(posixpath.join(workdir, filename), ignore_errors=True)


def no_sftp(reason: str) -> str:
    """Why nothing can be uploaded to a host whose sshd refused an SFTP channel for ``reason``."""
    return (f"the SSH server offers no SFTP ({reason}); enable its sftp subsystem "
            f"(Subsystem sftp in sshd_config)")


def describe_status(result: asyncssh.SSHCompletedProcess) -> str:
    if result.exit_signal:
        return f"killed by SIG{result.exit_signal[0]}"
    return f"exit status {result.exit_status}"


def last_lines(text: str, n: int = STDERR_LINES) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-n:]) if lines else "no output"
