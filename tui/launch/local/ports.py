"""Port checks and reservations on this machine, with the same binds as on remote hosts
(:mod:`tui.launch.snippets.ports`, which this module runs in-process).

TensorFlow's gRPC server binds ``[::]:port`` (dual stack) with SO_REUSEADDR, so a port is
usable when both an IPv4 and an IPv6 wildcard bind with SO_REUSEADDR succeed: that ignores
sockets lingering in TIME_WAIT from a previous run (gRPC ignores them too) but catches any
socket listening on the port, on any address.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from dataclasses import dataclass

import psutil

from tui.launch.snippets import ports


def port_is_free(port: int) -> tuple[bool, str]:
    """Whether a server could listen on ``port`` now, and if not, why (``in use``,
    ``not permitted``...): the same check remote hosts run (:func:`ports.problem`)."""
    reason = ports.problem(port)
    return reason is None, reason or ""


def port_holder(port: int) -> tuple[int, str | None] | None:
    """The pid and name of a process with a socket bound to ``port``, preferring a
    listener, or None if it cannot be found (another user's process, no permission).
    Scans /proc: call it in a thread."""
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None
    candidates = [c for c in connections if c.laddr and c.laddr.port == port and c.pid]
    candidates.sort(key=lambda c: c.status != psutil.CONN_LISTEN)
    for conn in candidates:
        assert conn.pid is not None
        try:
            return conn.pid, psutil.Process(conn.pid).name()
        except psutil.Error:
            return conn.pid, None
    return None


@dataclass
class LocalPortReservation:
    """A port held by bound (not listening) sockets, so the kernel hands it to no one else
    until :meth:`release`. Not frozen: releasing closes the sockets it owns."""

    port: int
    _sockets: tuple[socket.socket, ...]

    def release(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._sockets = ()


def reserve_free_ports(n: int, avoid: frozenset[int] = frozenset(),
                       attempts: int = 1000) -> list[LocalPortReservation]:
    """Reserve ``n`` distinct ports that are free on both IPv4 and IPv6, as remote hosts do
    (:func:`ports.reserve`: the kernel picks an ephemeral IPv4 port, the same port is bound on
    IPv6, and both stay bound without SO_REUSEADDR until released, so nobody else gets it)."""
    held = ports.reserve(n, set(avoid), attempts)
    if len(held) < n:
        for sockets in held.values():
            for sock in sockets:
                sock.close()
        raise OSError(errno.EADDRNOTAVAIL, f"could not find {n} free ports")
    return [LocalPortReservation(port, tuple(sockets)) for port, sockets in held.items()]
