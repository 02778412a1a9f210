"""What ``tfdist-tui check`` asks of an SSH host, changing nothing there: the resource probe a
run's preparation makes, and the copies snippet's ``look`` at the trainer's and the
``upload:`` folder's copies (:mod:`tui.launch.look` judges them), with whether the host's
sshd would take an upload (SFTP)."""

from __future__ import annotations

import asyncio

import asyncssh

from tui.launch.errors import HostFailure
from tui.launch.look import HostLook, find_copies
from tui.launch.ssh import deploy
from tui.launch.ssh.prepare import probe_resources
from tui.launch.ssh.remote_host import RemoteHost
from tui.launch.ssh.upload_copies import UploadCopies


async def look_at(host: RemoteHost, upload: UploadCopies | None, timeout: float) -> HostLook:
    """What ``host`` offers and what a run would find of its copies there. Raises
    :class:`~tui.launch.errors.HostError`."""
    packages = (deploy.local_package(), *((upload.package(),) if upload is not None else ()))
    resources, answer, sftp = await asyncio.gather(
        probe_resources(host, timeout),
        host.run_snippet("copies", ["look", host.spec.workdir, *(p.dirname for p in packages)], timeout),
        _sftp_problem(host))
    try:
        return HostLook(resources, tuple(find_copies(packages, answer, sftp)))
    except ValueError as exc:
        raise host.error(HostFailure.COMMAND_FAILED, str(exc)) from None


async def _sftp_problem(host: RemoteHost) -> str | None:
    """Why an upload could not be made over the host's connection (None: it could)."""
    conn = await host.first_connection()
    try:
        async with conn.start_sftp_client():
            return None
    except asyncssh.ChannelOpenError as exc:
        if conn.is_closed():
            raise host.error(HostFailure.CONNECTION_LOST, f"while opening SFTP: {exc.reason}") from None
        return deploy.no_sftp(exc.reason)
    except (asyncssh.Error, OSError) as exc:
        return f"SFTP: {exc}"
