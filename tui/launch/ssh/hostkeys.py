"""Host key verification against known_hosts, as strict as OpenSSH's by default.

Three policies (:class:`HostKeyPolicy`): ``STRICT`` refuses any key known_hosts does not list
for the host; ``ACCEPT_NEW`` records the key of a host known_hosts has no entry for (OpenSSH's
``StrictHostKeyChecking=accept-new``) but still refuses a *changed* key; ``INSECURE`` checks
nothing and is meant for throwaway test machines only.

A refused key is explained: its SHA256 fingerprint, the file consulted, and what to do.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import asyncssh

from tui.config.cluster import HostSpec
from tui.launch.errors import HostFailure

log = logging.getLogger(__name__)

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
SSH_DEFAULT_PORT = 22


class HostKeyPolicy(Enum):
    """What to do with a host key that known_hosts does not vouch for."""

    STRICT = "strict"
    ACCEPT_NEW = "accept-new"
    INSECURE = "insecure"

    @classmethod
    def from_flags(cls, accept_new_host_keys: bool = False,
                   insecure_no_host_key_check: bool = False) -> HostKeyPolicy:
        """The policy the command-line flags ask for (they exclude each other)."""
        if accept_new_host_keys and insecure_no_host_key_check:
            raise ValueError("--accept-new-host-keys and --insecure-no-host-key-check exclude each other")
        if insecure_no_host_key_check:
            return cls.INSECURE
        return cls.ACCEPT_NEW if accept_new_host_keys else cls.STRICT


INSECURE_WARNING = ("host key checking is OFF (--insecure-no-host-key-check): anyone between "
                    "this machine and the hosts could impersonate them and see everything sent")


@dataclass(frozen=True)
class HostKeyRefusal:
    """Why a host's key was refused, in enough detail to decide what to do about it."""

    failure: HostFailure  # HOST_KEY_UNKNOWN or HOST_KEY_CHANGED
    algorithm: str
    fingerprint: str
    known_hosts: Path
    host_pattern: str
    recorded: tuple[str, ...] = ()  # fingerprints known_hosts lists for the host

    def explain(self) -> str:
        """The message for people (the failure name itself is added by the caller)."""
        file = shlex.quote(str(self.known_hosts))
        offered = f"the host offers {self.algorithm} key {self.fingerprint}"
        if self.failure is HostFailure.HOST_KEY_UNKNOWN:
            return (f"{offered}, which {self.known_hosts} does not list. Compare the fingerprint "
                    f"with the one on the host (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then "
                    f"run again with --accept-new-host-keys to record it in {self.known_hosts}")
        listed = ", ".join(self.recorded) or "a key of another type"
        return (f"{offered}, but {self.known_hosts} lists {listed} for it. Someone may be "
                f"intercepting the connection, or the host was reinstalled. Nothing was accepted; "
                f"if the change is expected, remove the old entry with "
                f"ssh-keygen -R {shlex.quote(self.host_pattern)} -f {file} and run again with "
                f"--accept-new-host-keys")


def host_pattern(host: str, port: int) -> str:
    """How known_hosts names ``host`` at ``port``: ``host`` or ``[host]:port``."""
    return host if port == SSH_DEFAULT_PORT else f"[{host}]:{port}"


class HostKeyChecker:
    """Checks one connection's host key: pass :meth:`known_hosts` to ``asyncssh.connect`` and
    call :meth:`validate` from the client's ``validate_host_public_key``. After a refusal,
    :attr:`refusal` says why."""

    def __init__(self, spec: HostSpec, policy: HostKeyPolicy,
                 notify: Callable[[str], None] | None = None) -> None:
        self.spec = spec
        self.policy = policy
        self._notify = notify
        self.path = Path(os.path.expanduser(spec.known_hosts or DEFAULT_KNOWN_HOSTS))
        self.refusal: HostKeyRefusal | None = None
        self.recorded_new: str | None = None  # fingerprint accepted under ACCEPT_NEW
        self._known: asyncssh.SSHKnownHosts | None = None

    def known_hosts(self) -> asyncssh.SSHKnownHosts | None:
        """The trusted keys for asyncssh (None: checking off). Raises OSError or ValueError
        for a known_hosts file that cannot be read or parsed."""
        if self.policy is HostKeyPolicy.INSECURE:
            return None
        text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        self._known = asyncssh.import_known_hosts(text)
        return self._known

    def validate(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Called by asyncssh for a key known_hosts does not trust."""
        if self._known is None:  # INSECURE never gets here: asyncssh trusts every key then
            return False
        match_port = None if port == SSH_DEFAULT_PORT else port
        recorded_keys, recorded_cas, *_ = self._known.match(host, addr, match_port)
        fingerprint = key.get_fingerprint("sha256")
        pattern = host_pattern(host, port)
        if recorded_keys or recorded_cas:
            self.refusal = HostKeyRefusal(
                HostFailure.HOST_KEY_CHANGED, key.get_algorithm(), fingerprint, self.path, pattern,
                tuple(k.get_fingerprint("sha256") for k in recorded_keys))
            return False
        if self.policy is HostKeyPolicy.ACCEPT_NEW:
            try:
                self._record(pattern, key)
            except OSError as exc:
                log.error("cannot record the host key of %s in %s: %s", pattern, self.path, exc)
                return False
            self.recorded_new = fingerprint
            message = (f"host {self.spec.name}: recorded its new {key.get_algorithm()} key "
                       f"{fingerprint} in {self.path} (--accept-new-host-keys)")
            log.warning("%s", message)
            if self._notify is not None:
                self._notify(message)
            return True
        self.refusal = HostKeyRefusal(HostFailure.HOST_KEY_UNKNOWN, key.get_algorithm(), fingerprint,
                                      self.path, pattern)
        return False

    def _record(self, pattern: str, key: asyncssh.SSHKey) -> None:
        algorithm, blob = key.export_public_key("openssh").decode("ascii").split()[:2]
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        existing = self.path.read_bytes() if self.path.exists() else b""
        separator = "" if not existing or existing.endswith(b"\n") else "\n"
        with self.path.open("a", encoding="ascii") as file:
            file.write(f"{separator}{pattern} {algorithm} {blob}\n")

