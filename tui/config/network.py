"""What happens when a remote host stops answering (hosts.yaml ``network:``).

A host that does not answer is *unreachable*, not failed: its tasks may well be running. The
controller waits for it, and each task on it holds a *lease*: a task that has heard nothing
from the controller for ``lease`` seconds stops itself (its whole process group), so that no
task trains on alone on a host cut off from its controller. A host unreachable for longer
than ``unreachable_timeout`` seconds fails the run. A host that fails its preparation fails
the run before anything starts, unless ``on_host_failure: start_without`` lets the run start
without its tasks where the cluster can train without them
(:mod:`tui.core.supervisor.host_failure`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from tui.config import keys
from tui.config.yamlload import Item, NodeReader

#: After the lease ran out, how long a task may take to be gone: the watcher beside it looks
#: once a second, sends SIGTERM to its group and SIGKILL 5 s later (tui.launch.ssh.remote_command).
LEASE_MARGIN = 10.0
#: The shortest lease: the controller renews it every second.
MIN_LEASE = 3.0
#: Hosts connected and prepared at a time by default (pdsh's fan-out).
HOSTS_AT_ONCE = 32
KEYS = tuple(keys.NETWORK)


class OnHostFailure(str, Enum):
    """What a host that failed its preparation does to the run: ``fail`` it (nothing
    starts), or ``start_without`` its tasks where they are only non-chief workers."""

    FAIL = "fail"
    START_WITHOUT = "start_without"


@dataclass(frozen=True)
class NetworkSettings:
    """``unreachable_timeout``: seconds a host may stay unreachable before the run fails.
    ``lease``: seconds a remote task runs on without word from the controller.
    ``hosts_at_once``: hosts connected and prepared at a time (each costs this machine an
    SSH handshake and an upload). ``on_host_failure``: see :class:`OnHostFailure`."""

    unreachable_timeout: float = 300.0
    lease: float = 30.0
    hosts_at_once: int = HOSTS_AT_ONCE
    on_host_failure: OnHostFailure = OnHostFailure.FAIL

    @property
    def gone_after(self) -> float:
        """Seconds of silence after which every task of the host has surely stopped itself:
        from then on, starting it again elsewhere (or there) races nothing."""
        return self.lease + LEASE_MARGIN


def load(loader: NodeReader, item: Item | None) -> NetworkSettings:
    """The hosts.yaml loader's hook: the top-level ``network:`` item (None: the defaults)."""
    if item is None:
        return NetworkSettings()
    items = loader.mapping(item.value, "network",
                           "a mapping of unreachable_timeout:, lease:, hosts_at_once:, on_host_failure:")
    loader.check_keys(items, KEYS, "network")
    defaults = NetworkSettings()
    at_once = loader.integer(items["hosts_at_once"].value, "network.hosts_at_once", 1) \
        if "hosts_at_once" in items else defaults.hosts_at_once
    lease = loader.number(items["lease"].value, "network.lease", MIN_LEASE) if "lease" in items \
        else defaults.lease
    settings = NetworkSettings(lease=lease, unreachable_timeout=defaults.unreachable_timeout,
                               hosts_at_once=at_once)
    if "unreachable_timeout" in items:
        node = items["unreachable_timeout"].value
        timeout = loader.number(node, "network.unreachable_timeout", 1.0)
        if timeout <= settings.gone_after:
            raise loader.error(node, f"network.unreachable_timeout: must be more than lease + "
                                     f"{LEASE_MARGIN:g} s ({settings.gone_after:g} s), so that the tasks "
                                     f"of a host out of reach have stopped themselves before the run "
                                     f"gives up on it")
        settings = NetworkSettings(lease=lease, unreachable_timeout=timeout, hosts_at_once=at_once)
    elif settings.unreachable_timeout <= settings.gone_after:
        raise loader.error(items["lease"].value,
                           f"network.lease: {lease:g} s leaves no time before unreachable_timeout "
                           f"({settings.unreachable_timeout:g} s); raise unreachable_timeout too")
    if "on_host_failure" in items:
        policy = loader.choice(items["on_host_failure"].value, "network.on_host_failure", OnHostFailure)
        settings = dataclasses.replace(settings, on_host_failure=policy)
    return settings
