"""Port checks and reservations on this machine.

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


def _has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM):
            return True
    except OSError:
        return False


HAS_IPV6 = _has_ipv6()


def _bind(family: socket.AddressFamily, port: int, reuse: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            # Test IPv6 alone; the IPv4 side is tested by its own socket.
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(("::", port))
        else:
            sock.bind(("0.0.0.0", port))
        return sock
    except BaseException:
        sock.close()
        raise


def port_is_free(port: int) -> tuple[bool, str]:
    """Whether a server could listen on ``port`` now, and if not, why (``in use``,
    ``not permitted``...)."""
    families = [socket.AF_INET] + ([socket.AF_INET6] if HAS_IPV6 else [])
    for family in families:
        try:
            _bind(family, port, reuse=True).close()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False, "in use"
            if exc.errno == errno.EACCES:
                return False, "not permitted (privileged port)"
            return False, exc.strerror or str(exc)
    return True, ""


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
    """Reserve ``n`` distinct ports that are free on both IPv4 and IPv6.

    The kernel picks an ephemeral IPv4 port; we keep that socket bound and also bind the
    same port on IPv6. Both stay bound until released: without SO_REUSEADDR on our side,
    nobody else can bind the port meanwhile, and the kernel will not hand it out again."""
    held: list[LocalPortReservation] = []
    rejected: list[socket.socket] = []  # kept bound until the end so the kernel skips them
    try:
        for _ in range(attempts):
            if len(held) == n:
                break
            v4 = _bind(socket.AF_INET, 0, reuse=False)
            port = v4.getsockname()[1]
            if port in avoid:
                rejected.append(v4)
                continue
            sockets = [v4]
            if HAS_IPV6:
                try:
                    sockets.append(_bind(socket.AF_INET6, port, reuse=False))
                except OSError:
                    rejected.append(v4)
                    continue
            held.append(LocalPortReservation(port, tuple(sockets)))
        if len(held) < n:
            raise OSError(errno.EADDRNOTAVAIL, f"could not find {n} free ports")
        return held
    except BaseException:
        for reservation in held:
            reservation.release()
        raise
    finally:
        for sock in rejected:
            sock.close()
