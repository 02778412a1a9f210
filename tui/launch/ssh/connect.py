"""Opening SSH connections for hosts.yaml entries: options, jump hosts, and every way it can
fail turned into one clear :class:`~tui.launch.errors.HostError`.

What hosts.yaml says wins; what it leaves out comes from ``~/.ssh/config`` (asyncssh reads it
unless told not to) and ssh-agent (used when ``SSH_AUTH_SOCK`` is set and no ``identity:``
is given, as with OpenSSH's ``IdentitiesOnly``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from tui.config.cluster import HostSpec
from tui.config.network import LEASE_MARGIN
from tui.launch.base import DEFAULT_CONNECT_TIMEOUT
from tui.launch.errors import HostError, HostFailure
from tui.launch.ssh.hostkeys import INSECURE_WARNING, SSH_DEFAULT_PORT, HostKeyChecker, HostKeyPolicy

log = logging.getLogger(__name__)

#: Keepalives let the controller notice a connection that died silently (a cable pulled).
KEEPALIVE_INTERVAL = 5.0
KEEPALIVE_COUNT_MAX = 3
#: The longest wait between two resends of what the controller sent a host (beats, keepalives,
#: signals), in ms. TCP doubles the wait after each loss (200 ms, 400 ms, ... up to 120 s): a
#: beat lost to a 15 s cut is resent 12.6 s and then 25.4 s after it was sent, so a host whose
#: link came back after 15 s heard nothing until 25 s and its tasks' 20 s lease ran out with
#: the link back. Capped, the beats reach it within 2 s of the link's return.
RTO_MAX_MS = 2000
#: Linux's TCP_RTO_MAX_MS (6.15 and later; not named by every Python's socket module).
TCP_RTO_MAX_MS = getattr(socket, "TCP_RTO_MAX_MS", 44)
#: Jump chains longer than this are surely a mistake (config.py rejects loops already).
MAX_JUMPS = 8
#: The ciphers offered first (asyncssh's defaults follow, for servers without them): AES-GCM
#: runs in the CPU's AES instructions, some 5 µs a small packet in asyncssh against 40 µs
#: for its first choice, ChaCha20-Poly1305; at 64 hosts an idle controller sends and
#: receives a few hundred packets a second (beats, echoes, task lines). A ``Ciphers`` line
#: in the user's SSH config is left to decide.
PREFERRED_CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"


@dataclass(frozen=True)
class ConnectOptions:
    """How every connection of a launcher is made."""

    host_key_policy: HostKeyPolicy = HostKeyPolicy.STRICT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    #: OpenSSH client config files; ``()`` means ``~/.ssh/config`` if it exists, None none.
    ssh_config: tuple[str, ...] | None = ()
    #: The tasks' lease (hosts.yaml ``network:``): a connection outlives a silence of that long
    #: and more, so that a host back before its tasks' lease ran out finds them still attached.
    lease: float = 0.0

    @property
    def keepalive_count_max(self) -> int:
        """Keepalives unanswered before the connection is given up."""
        return max(KEEPALIVE_COUNT_MAX, math.ceil((self.lease + LEASE_MARGIN) / KEEPALIVE_INTERVAL) + 1)

    @property
    def silence_limit(self) -> float:
        """Seconds a connection's unanswered data may wait before TCP gives up on it: past the
        keepalives' limit, which gives up first (and says so)."""
        return (self.keepalive_count_max + 1) * KEEPALIVE_INTERVAL


def where(spec: HostSpec) -> str:
    """``address:port`` (``user@`` first when known), for messages."""
    user = f"{spec.user}@" if spec.user else ""
    return f"{user}{spec.address}:{spec.port}"


def jump_route(spec: HostSpec, hosts: Mapping[str, HostSpec]) -> list[HostSpec]:
    """The hosts to pass through, in order, to reach ``spec``: ``jump: a,b`` means connect to
    a, through it to b, through b to the host (as ``ssh -J``). A hop naming a hosts entry uses
    that entry's settings (and its own jump); any other hop is ``[user@]host[:port]``."""
    route: list[HostSpec] = []

    def add(current: HostSpec, depth: int) -> None:
        if current.jump is None:
            return
        if depth > MAX_JUMPS:
            raise HostError(spec.name, where(spec), HostFailure.UNREACHABLE,
                            f"more than {MAX_JUMPS} jump hosts; is there a loop?")
        for hop in (part.strip() for part in current.jump.split(",") if part.strip()):
            entry = hosts.get(hop)
            if entry is not None:
                add(entry, depth + 1)
                route.append(entry)
            else:
                route.append(parse_hop(hop))

    add(spec, 0)
    return route


def parse_hop(hop: str) -> HostSpec:
    """``[user@]host[:port]`` (``[v6]:port`` for IPv6) as a HostSpec with default settings."""
    user, _, rest = hop.rpartition("@")
    port = SSH_DEFAULT_PORT
    if rest.startswith("["):
        address, _, tail = rest[1:].partition("]")
        if tail.startswith(":") and tail[1:].isdigit():
            port = int(tail[1:])
    else:
        address, colon, port_text = rest.partition(":")
        if colon and port_text.isdigit():
            port = int(port_text)
    return HostSpec(name=hop, address=address, port=port, user=user or None)


async def open_connection(spec: HostSpec, options: ConnectOptions, *, for_host: HostSpec | None = None,
                          tunnel: asyncssh.SSHClientConnection | None = None,
                          on_lost: asyncio.Event | None = None,
                          notify: Callable[[str], None] | None = None) -> asyncssh.SSHClientConnection:
    """Connect and authenticate to ``spec`` (through ``tunnel`` if given). ``for_host`` is the
    host the connection is ultimately for, named in errors when ``spec`` is a jump host.
    ``on_lost`` is set when the connection closes; ``notify`` hears of host keys recorded
    under accept-new. Raises :class:`HostError`."""
    target = for_host or spec
    via = "" if for_host is None or for_host is spec else f"jump host {spec.name} ({where(spec)}): "

    def fail(failure: HostFailure, detail: str) -> HostError:
        return HostError(target.name, where(target), failure, via + detail)

    checker = HostKeyChecker(spec, options.host_key_policy, notify)
    try:
        known_hosts = checker.known_hosts()
    except (OSError, ValueError) as exc:
        raise fail(HostFailure.HOST_KEY_UNKNOWN,
                   f"cannot read known_hosts file {checker.path}: {exc}") from None
    if options.host_key_policy is HostKeyPolicy.INSECURE:
        log.warning("host %s: %s", spec.name, INSECURE_WARNING)

    kwargs: dict[str, Any] = {
        # () leaves a setting to ~/.ssh/config (or asyncssh's default). hosts.yaml cannot
        # tell "port: 22" from no port at all, so 22 defers to the config too.
        "port": spec.port if spec.port != SSH_DEFAULT_PORT else (),
        "username": spec.user if spec.user else (),
        "known_hosts": known_hosts,
        "client_factory": lambda: _Client(checker, on_lost),
        "connect_timeout": options.connect_timeout,
        "keepalive_interval": KEEPALIVE_INTERVAL,
        "keepalive_count_max": options.keepalive_count_max,
        "config": options.ssh_config,
    }
    if not _config_names_ciphers(options.ssh_config):
        kwargs["encryption_algs"] = PREFERRED_CIPHERS
    if tunnel is not None:
        kwargs["tunnel"] = tunnel
    if spec.identity:
        kwargs["client_keys"] = [_load_identity(spec.identity, fail)]
    try:
        conn = await asyncssh.connect(spec.address, **kwargs)
    except asyncssh.HostKeyNotVerifiable as exc:
        refusal = checker.refusal
        if refusal is None:
            raise fail(HostFailure.HOST_KEY_UNKNOWN, str(exc)) from None
        raise fail(refusal.failure, refusal.explain()) from None
    except asyncssh.PermissionDenied:
        user = spec.user or "the default user"
        how = f"identity {spec.identity}" if spec.identity else "ssh-agent and the default keys"
        raise fail(HostFailure.AUTH_REFUSED,
                   f"the host refused every key offered for {user} ({how})") from None
    except asyncssh.KeyExchangeFailed as exc:
        if "host key" in str(exc).lower() and checker.path.exists():
            raise fail(HostFailure.HOST_KEY_CHANGED,
                       f"the host offers no key of a type {checker.path} lists for it ({exc})") from None
        raise fail(HostFailure.UNREACHABLE, f"SSH key exchange failed: {exc}") from None
    except asyncssh.DisconnectError as exc:
        raise fail(HostFailure.UNREACHABLE, f"the SSH server disconnected: {exc.reason or exc}") from None
    except asyncssh.ChannelOpenError as exc:  # the jump host refused to forward
        raise fail(HostFailure.UNREACHABLE, f"the jump host could not open a tunnel: {exc.reason}") from None
    except asyncio.TimeoutError:
        raise fail(HostFailure.UNREACHABLE, f"no SSH answer within {options.connect_timeout:g} s") from None
    except socket.gaierror as exc:
        raise fail(HostFailure.UNREACHABLE, f"cannot resolve {spec.address}: {exc.strerror or exc}") from None
    except ConnectionRefusedError:
        raise fail(HostFailure.UNREACHABLE,
                   f"connection refused (no SSH server on port {spec.port}?)") from None
    except OSError as exc:
        raise fail(HostFailure.UNREACHABLE, exc.strerror or str(exc)) from None
    except (asyncssh.Error, ValueError) as exc:  # e.g. a malformed ~/.ssh/config
        raise fail(HostFailure.UNREACHABLE, str(exc)) from None
    bound_resends(conn, options)
    return conn


def bound_resends(conn: asyncssh.SSHClientConnection, options: ConnectOptions) -> bool:
    """Cap the wait between TCP's resends on ``conn``'s socket (:data:`RTO_MAX_MS`), so that a
    host whose link comes back hears the controller within seconds. TCP then counts its
    give-up time from that cap too (15 resends: 27 s), so the connection is given
    :attr:`ConnectOptions.silence_limit` instead (TCP_USER_TIMEOUT). Whether it was capped:
    not through a jump host (its first hop's socket carries it, capped there) nor on a
    kernel older than Linux 6.15 (the connection backs off as before)."""
    sock = conn.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, RTO_MAX_MS)
    except OSError:
        return False
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(options.silence_limit * 1000))
    return True


def _load_identity(path: str, fail: Any) -> asyncssh.SSHKey:
    """Read a private key; never logs or reports its contents."""
    file = os.path.expanduser(path)
    try:
        return asyncssh.read_private_key(file)
    except asyncssh.KeyImportError as exc:
        if "passphrase" in str(exc).lower():
            raise fail(HostFailure.IDENTITY_UNUSABLE,
                       f"identity {path} is protected by a passphrase, which this controller "
                       f"does not ask for: load it into ssh-agent (ssh-add {path}) and remove "
                       f"identity: from hosts.yaml") from None
        raise fail(HostFailure.IDENTITY_UNUSABLE, f"identity {path} is not a private key: {exc}") from None
    except OSError as exc:
        raise fail(HostFailure.IDENTITY_UNUSABLE,
                   f"identity {path} cannot be read: {exc.strerror or exc}") from None


class _Client(asyncssh.SSHClient):
    """Checks the host key and reports when the connection goes away."""

    def __init__(self, checker: HostKeyChecker, on_lost: asyncio.Event | None) -> None:
        self._checker = checker
        self._on_lost = on_lost

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._checker.validate(host, addr, port, key)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._on_lost is not None:
            self._on_lost.set()


def _config_names_ciphers(files: tuple[str, ...] | None) -> bool:
    """Whether an SSH config file asyncssh reads for the connection has a ``Ciphers`` line
    (in any Host block: then the choice is the config's for every host)."""
    paths = [Path(f).expanduser() for f in files] if files else (
        [] if files is None else [Path("~/.ssh/config").expanduser()])
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if any(line.strip().lower().startswith("ciphers") for line in text.splitlines()):
            return True
    return False
