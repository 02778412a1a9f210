"""Preparing one SSH host before its first task (:meth:`SSHLauncher.prepare`): connect,
probe the interpreter and folders, deploy the trainer (and the ``upload:`` folder), read the
host's cores and GPUs, and check TensorFlow.

The TensorFlow check reads the installed package's version (its metadata, no import: an
import costs seconds of CPU per host). Where the host's tasks will start from a warm pool
(the run said which kind: :meth:`SSHLauncher.expect_pools`), the pool is started now and its
import is the check: every host's pool then imports at once, while the hosts are checked,
instead of one host after another as the tasks start. A program that may not use TensorFlow
(run without the shim) gets no check at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tui.launch.base import HostInfo
from tui.launch.errors import HostFailure
from tui.launch.host_steps import HostPhase
from tui.launch.probe import HostResources
from tui.launch.ssh import deploy
from tui.launch.ssh.host_link import SSHHostLink
from tui.launch.ssh.remote_host import RemoteHost
from tui.launch.ssh.upload_copies import UploadCopies
from tui.launch.ssh.warm import RemotePools

log = logging.getLogger(__name__)

#: Told of each step as it begins: the phase, and what the step does.
Step = Callable[[HostPhase, str], None]


def _no_step(phase: HostPhase, what: str) -> None:
    """Nobody listens."""


async def prepare_host(host: RemoteHost, probe_timeout: float, upload: UploadCopies | None,
                       pools: RemotePools | None, pool_mode: str | None, link: SSHHostLink,
                       lease: float, *, check_tf: bool = True, step: Step = _no_step) -> HostInfo:
    """Make ``host`` ready and attach its ``link`` (its lease keeper); with ``pools`` and
    ``pool_mode`` its pool of that mode is started (and is the TensorFlow check), holding the
    link's lease of ``lease`` seconds; without ``check_tf`` TensorFlow is not looked for.
    ``step`` is told of each step as it begins. Raises :class:`~tui.launch.errors.HostError`."""
    if not host.connections:
        step(HostPhase.CONNECTING, "")
    conn = await host.first_connection()
    pooled = pools is not None and pool_mode is not None
    step(HostPhase.PREPARING, "checking Python" + (" and TensorFlow" if check_tf and not pooled else ""))
    found = await deploy.probe(conn, host.spec, probe_timeout, import_tf=check_tf and not pooled)
    step(HostPhase.PREPARING, "uploading the trainer")
    deployment, resources = await asyncio.gather(deploy.deploy(conn, host.spec, found.workdir),
                                                 probe_resources(host, probe_timeout))
    if upload is not None:
        step(HostPhase.PREPARING, "uploading the program")
        await upload.ensure(host, found.workdir)
    step(HostPhase.PREPARING, "starting its lease keeper")
    await link.attach(host)
    tf_version = found.tf_version
    if pools is not None and pool_mode is not None:
        step(HostPhase.PREPARING, "starting its warm pool (importing TensorFlow)")
        tf_version = await pools.prestart(host, host.spec, pool_mode, found.workdir, deployment.path,
                                          link.lease_file, lease) or ""
        if not tf_version and check_tf:  # no pool: the probe says whether TensorFlow is there
            tf_version = (await deploy.probe(conn, host.spec, probe_timeout)).tf_version
    log.info("host %s: Python %s, TensorFlow %s, trainer in %s (%s)", host.spec.name,
             found.python_version, tf_version, deployment.path,
             "uploaded" if deployment.uploaded else "already there")
    return HostInfo(name=host.spec.name, python=found.python, python_version=found.python_version,
                    tf_version=tf_version, workdir=found.workdir, home=found.home,
                    trainer_path=deployment.path, uploaded=deployment.uploaded,
                    configured_workdir=host.spec.workdir, resources=resources)


async def probe_resources(host: RemoteHost, timeout: float) -> HostResources:
    """The host's cores and GPUs, as its tasks (with the host's env) will see them."""
    answer = await host.run_snippet("resources", [], timeout)
    try:
        return HostResources.from_probe(answer)
    except ValueError as exc:
        raise host.error(HostFailure.COMMAND_FAILED, f"resource probe: {exc}") from None
